"""Scheduler failover under a cron load: --schedulers scheduler processes share the 16 shards;
--jobs cron jobs fire every second (`* * * * * *`, misfire catch_up); the scheduler holding the
most shards is killed with kill -9 (--kills times, started again after each); seconds until
occurrences resume, in seconds and in shard-lease TTLs, and missed and duplicated occurrences
over the whole run.

    .venv/bin/python -m bench.failover [--quick] [--kills 3] [--jobs 64] [--schedulers 3]

The kill and its measurement are bench/chaos.py's `scheduler_kill` (from the kill to the first
run created for a slot due after it, the slowest of the victim's jobs), the end checks are
tests.helpers.lab.invariants' `coverage` (a slot with neither a run nor a recorded skip is missed;
one whose occurrence got more than one `RunScheduled` is duplicated) and `shard_epoch_order`.
Leases as in the fault suite (FAULT_ENV: 3 s shard-lease TTL, 50 ms polls). An SDK worker runs
the no-op runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.chaos import SHARD_TTL, Chaos
from bench.common import (
    base_parser,
    bench_cluster,
    log,
    machine,
    sdk_worker,
    submit_jobs,
    table,
    write_result,
)
from ostinato import eventloop
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import coverage, shard_epoch_order
from tests.helpers.lab.lab import FAULT_ENV, Lab

SCENARIO = "failover"
TARGET_TTLS = 2


async def main(args: Any) -> dict[str, Any]:
    if args.quick:
        args.kills = min(args.kills, 1)
    async with bench_cluster(SCENARIO, env=FAULT_ENV) as bench, sdk_worker(bench):
        for i in range(1, args.schedulers):
            await asyncio.to_thread(bench.cluster.spawn, f"scheduler-{i + 1}", "scheduler")
        db = Db(bench.url)
        chaos = Chaos(argparse.Namespace(seed=None),
                      Lab(cluster=bench.cluster, db=db, api_key=bench.key))
        try:
            start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
            schedule = {"cron": "* * * * * *", "start_at": start.isoformat(),
                        "misfire": "catch_up", "catch_up_max": 1000}
            ids: list[str] = []

            def job(i: int) -> dict[str, Any]:
                return {"name": f"tick-{i}", "task": "noop", "schedule": schedule}

            await submit_jobs(bench, args.jobs, job, batch=args.jobs, submitters=1)
            ids = [str(r["id"]) for r in await db.fetch("SELECT id FROM jobs ORDER BY name")]
            chaos.recurring, chaos.recurring_start = ids, start
            log(SCENARIO, f"{len(ids)} cron jobs every second on {args.schedulers} schedulers; "
                          f"warming up {args.warmup:g}s")
            await asyncio.sleep(args.warmup)
            kills = []
            for k in range(1, args.kills + 1):
                fault = await chaos.scheduler_kill()
                kills.append({"survived": fault.survived, **fault.detail})
                log(SCENARIO, f"kill #{k}: {fault.detail}")
                await asyncio.sleep(args.settle)
            async with bench.client() as client:
                for job_id in ids:
                    await client.delete(f"/v1/jobs/{job_id}")
            await asyncio.sleep(2)
            slots, missed, duplicated, skipped = await coverage(db, ids, start)
            dup_events = await db.fetchval(
                "SELECT count(*) FROM (SELECT 1 FROM events WHERE type = 'RunScheduled' "
                "GROUP BY data->>'job_id', data->>'scheduled_for' HAVING count(*) > 1) AS d")
            epochs_checked, backwards = await shard_epoch_order(db)
        finally:
            await db.close()
    times = [k["failover_s"] for k in kills if k.get("failover_s") is not None]
    return {"scenario": SCENARIO, "cron_jobs": args.jobs, "schedulers": args.schedulers,
            "shard_lease_ttl_s": SHARD_TTL, "kills": kills,
            "failover_s": {"median": round(statistics.median(times), 2) if times else None,
                           "max": max(times, default=None), "n": len(times)},
            "failover_ttls_max": round(max(times) / SHARD_TTL, 2) if times else None,
            "slots_expected": slots, "missed": missed, "duplicated": duplicated,
            "skipped": skipped, "duplicate_run_scheduled_events": dup_events,
            "epochs_checked": epochs_checked, "epoch_went_backwards": len(backwards),
            "target": f"failover ≤ {TARGET_TTLS} lease TTLs ({TARGET_TTLS * SHARD_TTL:g} s), "
                      "0 missed, 0 duplicated", "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    f = r["failover_s"]
    rows = [("failover median (s)", f["median"], ""),
            ("failover max (s)", f["max"],
             f"target ≤ {TARGET_TTLS * r['shard_lease_ttl_s']:g} ({TARGET_TTLS} TTLs)"),
            ("failover max (TTLs)", r["failover_ttls_max"], f"target ≤ {TARGET_TTLS}"),
            ("kills survived", f"{sum(k['survived'] for k in r['kills'])}/{len(r['kills'])}", ""),
            ("slots expected", r["slots_expected"], ""),
            ("missed occurrences", r["missed"], "target 0"),
            ("duplicated occurrences", r["duplicated"], "target 0"),
            ("skipped (recorded)", r["skipped"], "catch_up: expect 0"),
            ("shard epochs gone backwards", r["epoch_went_backwards"], "expect 0")]
    return table(f"Scheduler failover: kill -9 x{len(r['kills'])}, {r['cron_jobs']} cron jobs "
                 f"every second, {r['schedulers']} schedulers", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--schedulers", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=8)
    parser.add_argument("--settle", type=float, default=3)
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
