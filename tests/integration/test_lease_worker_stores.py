"""The lease and worker stores return exactly the columns of their typed rows: a migration that
adds, drops or renames a column of `attempt_leases`, `shard_leases`, `scheduler_instances` or
`workers` fails here, not at a caller that reads the row."""

from __future__ import annotations

import asyncpg
import msgspec
import pytest

from ostinato.leases import attempts, shard
from ostinato.workers import registry

pytestmark = pytest.mark.integration

# (store, query) → the row type its rows are converted to.
ROW_OF = {
    (attempts, "grant_leases"): attempts.GrantedLease,
    (attempts, "extend_leases_if_token"): attempts.ExtendedLease,
    (attempts, "current_tokens"): attempts.LeaseToken,
    (attempts, "leases_of_worker"): attempts.LeaseToken,
    (attempts, "abandoned_leases"): attempts.WatchedLease,
    (attempts, "busy_slots"): attempts.BusySlots,
    (attempts, "stuck_leases"): attempts.StuckLeases,
    (attempts, "running_steps"): attempts.RunningStep,
    (shard, "renew_shards_if_epoch"): shard.ShardEpoch,
    (shard, "acquire_shards"): shard.ShardEpoch,
    (shard, "shard_table"): shard.ShardLease,
    (shard, "shard_passes"): shard.ShardPass,
    (registry, "live_capacity"): registry.PoolCapacity,
    (registry, "list_workers"): registry.WorkerInfo,
    (registry, "live_versions"): registry.ServedVersion,
    (registry, "serving_workers"): registry.ServingCount,
    (registry, "unserved_pools"): registry.UnservedPool,
}
# (store, query) → its one column, read as a scalar (or a set of scalars).
SCALAR = {
    (shard, "instance_seen"): "live",
    (shard, "hold_shards_if_epoch"): "shard",
    (shard, "decided_through_of_job"): "decided_through",
    (registry, "forget_worker"): "worker_id",
    (registry, "serves_version"): "exists",
}
# DML whose rows (if it returns any) are not read: only its status or effect counts.
DML = {
    (attempts, "release_leases"),
    (attempts, "step_started"),
    (shard, "instance_gone"),
    (shard, "release_shards_if_epoch"),
    (shard, "passed_every_shard"),
    (registry, "touch_worker"),
    (registry, "worker_seen"),
    (registry, "forget_stale_workers"),
    (registry, "gateway_seen"),
    (registry, "gateway_gone"),
}
STORES = (attempts, shard, registry)


def test_every_lease_and_worker_query_is_accounted_for_once() -> None:
    accounted = [name for _, name in [*ROW_OF, *SCALAR, *DML]]
    assert len(accounted) == len(set(accounted))
    named = {name for store in STORES for name in store.Q}  # type: ignore[attr-defined]
    assert named == set(accounted)
    for store, name in [*ROW_OF, *SCALAR, *DML]:
        assert name in store.Q  # type: ignore[attr-defined]


def test_the_row_types_are_frozen_structs() -> None:
    for row_type in set(ROW_OF.values()):
        assert issubclass(row_type, msgspec.Struct)
        assert row_type.__struct_config__.frozen


def _ids(x: object) -> str:
    return getattr(x, "__name__", str(x))


@pytest.mark.parametrize(("store", "name"), list(ROW_OF), ids=_ids)
async def test_a_query_returns_the_columns_of_its_row(
    pool: asyncpg.Pool, store: object, name: str,
) -> None:
    async with pool.acquire() as conn:
        statement = await conn.prepare(store.Q[name])  # type: ignore[attr-defined]
        columns = [a.name for a in statement.get_attributes()]
    fields = msgspec.structs.fields(ROW_OF[(store, name)])
    assert columns == [f.name for f in fields]  # in order: rows are built positionally


@pytest.mark.parametrize(("store", "name"), list(SCALAR), ids=_ids)
async def test_a_scalar_query_returns_its_one_column(
    pool: asyncpg.Pool, store: object, name: str,
) -> None:
    async with pool.acquire() as conn:
        statement = await conn.prepare(store.Q[name])  # type: ignore[attr-defined]
        columns = [a.name for a in statement.get_attributes()]
    assert columns == [SCALAR[(store, name)]]


@pytest.mark.parametrize(("store", "name"), sorted(DML, key=lambda k: k[1]), ids=_ids)
async def test_a_dml_query_prepares(pool: asyncpg.Pool, store: object, name: str) -> None:
    async with pool.acquire() as conn:
        await conn.prepare(store.Q[name])  # type: ignore[attr-defined]
