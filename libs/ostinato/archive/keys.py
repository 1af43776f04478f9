"""Object keys of the archive. Every key starts with `tenants/{tenant_id}/`, so one tenant's
archive is one prefix (listing, a bucket policy, a deletion on offboarding) and a key built for
one tenant can never name another's object. Ids are written in canonical form (lower-case
hyphenated UUIDs): two spellings of one id are one key."""

from __future__ import annotations

import re
import uuid
from datetime import date

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_RUN_KEY = re.compile(rf"^tenants/(?P<tenant>{_UUID})/runs/(?P<run>{_UUID})\.json\.gz$")
_DAG_RUN_KEY = re.compile(
    rf"^tenants/(?P<tenant>{_UUID})/dag-runs/(?P<dag_run>{_UUID})\.json\.gz$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_BLOB_KEY = re.compile(rf"^tenants/(?P<tenant>{_UUID})/blobs/sha256/(?P<two>[0-9a-f]{{2}})/"
                       rf"(?P<hex>[0-9a-f]{{64}})$")
_INDEX_KEY = re.compile(
    rf"^tenants/(?P<tenant>{_UUID})/index/(?P<y>\d{{4}})/(?P<m>\d{{2}})/(?P<d>\d{{2}})/"
    rf"(?P<batch>{_UUID})\.json\.gz$"
)


def _canonical(value: uuid.UUID | str, what: str) -> uuid.UUID:
    """A UUID from a UUID or its text; anything else is a ValueError naming `what` (a key
    built from a path segment such as `../x` must not escape its tenant's prefix)."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"{what} {value!r} is not a UUID") from None


def tenant_prefix(tenant_id: uuid.UUID | str) -> str:
    """Every archive object of one tenant is under this prefix."""
    return f"tenants/{_canonical(tenant_id, 'tenant id')}/"


def run_key(tenant_id: uuid.UUID | str, run_id: uuid.UUID | str) -> str:
    """The one object holding a run's whole history."""
    return f"{tenant_prefix(tenant_id)}runs/{_canonical(run_id, 'run id')}.json.gz"


def parse_run_key(key: str) -> tuple[uuid.UUID, uuid.UUID]:
    """(tenant_id, run_id) of a run key; ValueError for anything that is not one."""
    match = _RUN_KEY.match(key)
    if match is None:
        raise ValueError(f"{key!r} is not an archived run's key")
    return uuid.UUID(match["tenant"]), uuid.UUID(match["run"])


def dag_run_key(tenant_id: uuid.UUID | str, dag_run_id: uuid.UUID | str) -> str:
    """The one object holding a DAG run's history (its row, nodes and stream); its node runs
    are run objects of their own (`run_key`)."""
    return f"{tenant_prefix(tenant_id)}dag-runs/{_canonical(dag_run_id, 'DAG run id')}.json.gz"


def parse_dag_run_key(key: str) -> tuple[uuid.UUID, uuid.UUID]:
    """(tenant_id, dag_run_id) of a DAG run key; ValueError for anything that is not one."""
    match = _DAG_RUN_KEY.match(key)
    if match is None:
        raise ValueError(f"{key!r} is not an archived DAG run's key")
    return uuid.UUID(match["tenant"]), uuid.UUID(match["dag_run"])


def index_prefix(tenant_id: uuid.UUID | str, ended_day: date | None = None) -> str:
    """The index objects of one tenant, or of the runs it saw end on one day (UTC): listing a
    time range lists the days it spans, in key order = day order."""
    prefix = f"{tenant_prefix(tenant_id)}index/"
    if ended_day is None:
        return prefix
    return f"{prefix}{ended_day.year:04d}/{ended_day.month:02d}/{ended_day.day:02d}/"


def index_key(tenant_id: uuid.UUID | str, ended_day: date, batch_id: uuid.UUID | str) -> str:
    """One batch's summary rows of the tenant's runs that ended on `ended_day` (UTC)."""
    return f"{index_prefix(tenant_id, ended_day)}{_canonical(batch_id, 'batch id')}.json.gz"


def parse_index_key(key: str) -> tuple[uuid.UUID, date, uuid.UUID]:
    """(tenant_id, ended_day, batch_id) of an index key; ValueError for anything else."""
    match = _INDEX_KEY.match(key)
    if match is None:
        raise ValueError(f"{key!r} is not an archive index key")
    day = date(int(match["y"]), int(match["m"]), int(match["d"]))
    return uuid.UUID(match["tenant"]), day, uuid.UUID(match["batch"])


def blob_key(tenant_id: uuid.UUID | str, sha256_hex: str) -> str:
    """A blob's object (an output, payload, signal payload, step output or captured log over
    the inline limit) by content address: one tenant's equal values share one object, two
    tenants' never do (its data leaves with the tenant's prefix)."""
    if not isinstance(sha256_hex, str) or not _SHA256.match(sha256_hex):
        raise ValueError(f"{sha256_hex!r} is not a lower-case hex SHA-256 digest")
    return f"{tenant_prefix(tenant_id)}blobs/sha256/{sha256_hex[:2]}/{sha256_hex}"


def parse_blob_key(key: str) -> tuple[uuid.UUID, str]:
    """(tenant_id, sha256 hex) of a blob key; ValueError for anything that is not one."""
    match = _BLOB_KEY.match(key)
    if match is None or match["two"] != match["hex"][:2]:
        raise ValueError(f"{key!r} is not a blob key")
    return uuid.UUID(match["tenant"]), match["hex"]
