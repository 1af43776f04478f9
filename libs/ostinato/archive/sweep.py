"""The bucket sweep's walk (issue 38 item 4, docs/RETENTION.md "Blobs"): which listed keys are
blob objects to check against the database, and where the next page starts.

The sweep lists `tenants/` a page at a time from a cursor. Under each tenant the blob objects
(`tenants/{t}/blobs/sha256/...`) come first in key order, before the tenant's archive objects
(`dag-runs/`, `index/`, `runs/`: one or more per archived run, the bulk of the bucket). So a
page that meets a tenant's first key past its blobs jumps to the next tenant (start after
`tenants/{t}0`: `0` sorts right after `/`) instead of listing its archives: a pass costs about
one request per thousand blob objects plus one per tenant. Pure: no store, no database."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from ostinato.archive.keys import parse_blob_key

ROOT = "tenants/"
_TENANT_CHARS = 36  # a canonical UUID


@dataclass(frozen=True, slots=True)
class SweepStep:
    """What one listed page means: the blob keys in it, as (key, tenant, SHA-256), and the
    cursor of the next page (None: the pass is over, the next starts from the beginning)."""

    blobs: list[tuple[str, uuid.UUID, str]]
    next_after: str | None


def _tenant_of(key: str) -> str | None:
    rest = key[len(ROOT):]
    if not key.startswith(ROOT) or rest[_TENANT_CHARS:_TENANT_CHARS + 1] != "/":
        return None
    try:
        return str(uuid.UUID(rest[:_TENANT_CHARS]))
    except ValueError:
        return None


def sweep_step(keys: Sequence[str], full: bool) -> SweepStep:
    """The blob keys of one page of keys listed in order under `ROOT`, and the next cursor.
    `full`: the page held as many keys as asked (more may follow)."""
    blobs: list[tuple[str, uuid.UUID, str]] = []
    for key in keys:
        try:
            tenant_id, digest = parse_blob_key(key)
        except ValueError:
            continue  # an archive object, or a name that is no blob's: never the sweep's
        blobs.append((key, tenant_id, digest))
    if not full or not keys:
        return SweepStep(blobs, None)
    last = keys[-1]
    tenant = _tenant_of(last)
    if tenant is None:
        return SweepStep(blobs, last)
    blobs_prefix = f"{ROOT}{tenant}/blobs/"
    if last.startswith(blobs_prefix):
        return SweepStep(blobs, last)
    if last < blobs_prefix:  # a key of the tenant's that sorts before its blobs
        return SweepStep(blobs, blobs_prefix)
    return SweepStep(blobs, f"{ROOT}{tenant}0")  # past its blobs: on to the next tenant
