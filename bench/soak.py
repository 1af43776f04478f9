"""Soak: a steady rate of no-op runs for a long while with retention set to a few minutes and
the archiver on (issue 38's benchmark): does the hot database stay flat while runs keep
flowing, and what does archiving cost?

    .venv/bin/python -m bench.soak [--quick] [--rate 100] [--minutes 30] [--keep 180]
                                   [--local-store] [--env OSTINATO_X=VALUE ...]

A fresh cluster (bench_cluster) whose operator lowered the retention floor
(OSTINATO_RETENTION_FLOOR_SECONDS=60), the tenant's retention set to --keep seconds through
PUT /v1/tenants/{id}/retention, the archiver writing to the real S3 server from infra
(SeaweedFS, `make infra-up`; a prefix of its own, emptied after) or, with --local-store, to a
local folder. A feeder submits one-off `at` jobs due at --rate a second, each second's jobs a
few seconds before they fall due (POST /v1/jobs/batch), for --minutes (--quick: 5 minutes,
keep 120 s); an in-process SDK worker runs them.

Every minute, and at the end, it prints: the hot database's size (pg_database_size, and
pg_total_relation_size of the largest tables), runs hot and archived, bytes per run hot and
archived, the archive's bytes and objects (the archiver's counters; at the end the objects
listed), the archiver's CPU (the reconciler process's CPU seconds over the runs archived,
and that over a run's CPU, every process together), start lag p50/p99 of the minute's runs;
at the end the same before and during archiving, the hot database's growth over the last
half, every table's and index's size, and the extrapolation to 1,000 runs/s: GB a day
archived, and the hot database's growth a day. Figures only: nothing here is asserted.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.common import (
    ROOT,
    base_parser,
    bench_cluster,
    cpu_by_process_group,
    cpu_seconds,
    cpu_spent,
    distribution,
    log,
    machine,
    sdk_worker,
    service_env,
    submit_jobs,
    table,
    write_result,
)
from bench.start_lag import warm_up
from ostinato import eventloop
from ostinato.objects import open_object_store
from tests.helpers.lab.metrics import metric_total, scrape
from tests.helpers.objects import empty, s3_url

SCENARIO = "soak"
FLOOR_SECONDS = 60  # the operator's floor the soak sets: retention in minutes
LEAD_S = 4.0  # each second's jobs are submitted this long before the first falls due
SETTLE_S = 10.0  # a minute's start lag is read this long after it ended (runs starting late)
RUNS_PER_DAY_AT_1000 = 1000 * 86400

SIZES = """
SELECT c.relname AS name, c.relkind::text AS kind, pg_total_relation_size(c.oid) AS total,
       pg_relation_size(c.oid) AS own,
       CASE WHEN c.relkind = 'i' THEN (SELECT t.relname FROM pg_index x
            JOIN pg_class t ON t.oid = x.indrelid WHERE x.indexrelid = c.oid) END AS of_table
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'i')
"""


async def sizes(conn: asyncpg.Connection) -> dict[str, Any]:
    """The hot database: its size, every table's total (with its indexes and TOAST) and every
    index's own size, in bytes."""
    rows = await conn.fetch(SIZES)
    return {"database": await conn.fetchval("SELECT pg_database_size(current_database())"),
            "tables": {r["name"]: r["total"] for r in rows if r["kind"] != "i"},
            "indexes": {r["name"]: {"bytes": r["own"], "table": r["of_table"]}
                        for r in rows if r["kind"] == "i"}}


def hot_bytes(s: dict[str, Any]) -> int:
    return sum(s["tables"].values())


async def lags(conn: asyncpg.Connection, since: datetime, until: datetime) -> list[float]:
    """Start lag (started_at - due_at, ms) of the soak's runs due in [since, until)."""
    rows = await conn.fetch(
        "SELECT extract(epoch FROM started_at - due_at) * 1000 AS lag FROM runs"
        " WHERE due_at >= $1 AND due_at < $2 AND started_at IS NOT NULL", since, until)
    return [float(r["lag"]) for r in rows]


async def archiver_counters(port: int) -> dict[str, float]:
    samples = await scrape(port)
    return {"archived": metric_total(samples, "ostinato_archive_runs_total", outcome="archived"),
            "removed": metric_total(samples, "ostinato_archive_runs_total", outcome="removed"),
            "bytes": metric_total(samples, "ostinato_archive_bytes_total"),
            "failures": metric_total(samples, "ostinato_archive_failures_total")}


async def feed(bench: Any, rate: float, t0: datetime, seconds: int, fed: list[int]) -> None:
    """Each second k of the soak: floor((k+1)·rate) - floor(k·rate) one-off jobs due evenly
    over it, submitted LEAD_S before it begins; `fed[0]` counts them."""
    start = time.monotonic() + (t0 - datetime.now(UTC)).total_seconds()
    behind = 0
    for k in range(seconds):
        count = math.floor((k + 1) * rate) - math.floor(k * rate)
        begins = t0 + timedelta(seconds=k)
        wait = start + k - LEAD_S - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        elif wait < -LEAD_S:
            behind += 1
        if count:
            await submit_jobs(bench, count, lambda i, b=begins, n=count: {
                "name": f"soak-{b:%H%M%S}-{i}", "task": "noop",
                "schedule": {"at": (b + timedelta(seconds=i / n)).isoformat()}},
                batch=500, submitters=2, scenario=SCENARIO)
            fed[0] += count
    if behind:
        log(SCENARIO, f"the feeder submitted {behind} seconds' jobs after they fell due")


def _mb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1e6:.1f} MB"


def minute_line(m: dict[str, Any]) -> str:
    lag = m["start_lag_ms"]
    return (f"min {m['minute']:>2}: db {_mb(m['database_bytes'])}, hot tables "
            f"{_mb(m['hot_bytes'])}, runs hot {m['runs_hot']}, archived "
            f"{int(m['archived_total'])} ({_mb(m['archive_bytes'])}), "
            f"{m['bytes_per_hot_run'] or '-'} B/hot run, "
            f"{m['bytes_per_archived_run'] or '-'} B/archived run, archiver CPU "
            f"{m['archiver_cpu_ms_per_run'] or '-'} ms/run, lag p50 {lag['p50']} "
            f"p99 {lag['p99']} ms (n {lag['n']})")


async def run(args: Any) -> dict[str, Any]:
    prefix = f"bench/soak-{uuid.uuid4().hex[:8]}"
    local_dir = ROOT / ".cache" / "bench" / prefix.replace("/", "-")
    store_url = local_dir.as_uri() if args.local_store else s3_url(prefix)
    env = {"OSTINATO_RETENTION_FLOOR_SECONDS": str(FLOOR_SECONDS),
           "OSTINATO_OBJECT_STORE_URL": store_url, **service_env(args)}
    seconds = int(args.minutes * 60)
    minutes: list[dict[str, Any]] = []
    before_lags: list[float] = []
    during_lags: list[float] = []
    async with bench_cluster(SCENARIO, env=env) as bench, sdk_worker(bench, args.concurrency):
        conn = await asyncpg.connect(bench.url)
        try:
            tenant_id = await conn.fetchval("SELECT id FROM tenants WHERE name = 'bench'")
            async with httpx.AsyncClient(base_url=bench.cluster.api_url, timeout=30) as admin:
                r = await admin.put(
                    f"/v1/tenants/{tenant_id}/retention", json={
                        "keep": args.keep, "archive": True, "reason": "bench/soak"},
                    headers={"Authorization": f"Bearer {bench.cluster.admin_key}"})
                r.raise_for_status()
            first = await sizes(conn)  # the fresh database, before any run
            await warm_up(bench, SCENARIO)
            reconciler = bench.pid("reconciler")
            metrics_port = bench.cluster.ports["reconciler"]
            pids = {alias: int(p.pid) for alias, p in bench.cluster.procs.items()}
            t0 = (datetime.now(UTC) + timedelta(seconds=LEAD_S + 2)).replace(microsecond=0)
            log(SCENARIO, f"{args.rate:g} runs/s for {args.minutes:g} min from {t0:%H:%M:%S}, "
                          f"keep {args.keep} s, archive to "
                          f"{'a local folder' if args.local_store else 'S3 ' + prefix}")
            fed = [0]
            feeder = asyncio.create_task(feed(bench, args.rate, t0, seconds, fed))
            cpu0 = cpu_by_process_group(pids)
            rec0 = await archiver_counters(metrics_port)
            prev_cpu, prev_rec, prev_t = cpu0, rec0, t0
            reconciler_cpu0 = prev_reconciler = cpu_seconds(reconciler)
            for minute in range(1, math.ceil(seconds / 60) + 1):
                until = min(t0 + timedelta(seconds=60 * minute), t0 + timedelta(seconds=seconds))
                await asyncio.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()
                                        + SETTLE_S))
                s = await sizes(conn)
                hot_runs = await conn.fetchval("SELECT count(*) FROM runs")
                rec = await archiver_counters(metrics_port)
                cpu = cpu_by_process_group(pids)
                reconciler_cpu = cpu_seconds(reconciler)
                window = await lags(conn, prev_t, until)
                archiving = rec["removed"] > 0 and prev_rec["removed"] > 0
                (during_lags if archiving else before_lags).extend(window)
                archived = rec["archived"] - prev_rec["archived"]
                spent = cpu_spent(prev_cpu, cpu)
                runs_done = max(1, len(window))
                m = {"minute": minute, "at": until.isoformat(), "fed": fed[0],
                     "database_bytes": s["database"], "hot_bytes": hot_bytes(s),
                     "runs_hot": hot_runs, "archived_total": rec["archived"],
                     "removed_total": rec["removed"], "archive_bytes": rec["bytes"],
                     "archive_failures": rec["failures"],
                     "bytes_per_hot_run": (round((hot_bytes(s) - hot_bytes(first)) / hot_runs)
                                           if hot_runs else None),
                     "bytes_per_archived_run": (round(rec["bytes"] / rec["archived"])
                                                if rec["archived"] else None),
                     "archiver_cpu_ms_per_run": (round((reconciler_cpu - prev_reconciler)
                                                       * 1000 / archived, 3)
                                                 if archived else None),
                     "cpu_ms_per_run_all": round(sum(spent.values()) * 1000 / runs_done, 3),
                     "archiving": archiving,
                     "reconciler_cpu_s": round(reconciler_cpu - prev_reconciler, 2),
                     "start_lag_ms": distribution(window),
                     "largest_tables": dict(sorted(s["tables"].items(),
                                                   key=lambda kv: -kv[1])[:6])}
                minutes.append(m)
                print(minute_line(m), flush=True)
                prev_cpu, prev_rec, prev_t, prev_reconciler = cpu, rec, until, reconciler_cpu
            await feeder
            last = await sizes(conn)
            end_rec = await archiver_counters(metrics_port)
            end_cpu = cpu_by_process_group(pids)
            end_reconciler = cpu_seconds(reconciler)
            hot_runs = await conn.fetchval("SELECT count(*) FROM runs")
        finally:
            await conn.close()
        objects, listed_bytes = await archive_contents(store_url, local_dir, args.local_store)
    if not args.local_store:
        store = open_object_store(store_url)
        try:
            await empty(store)
        finally:
            await store.close()
    else:
        shutil.rmtree(local_dir, ignore_errors=True)
    return summarize(args, minutes, first, last, hot_runs, rec0, end_rec, cpu0, end_cpu,
                     end_reconciler - reconciler_cpu0, before_lags, during_lags, objects,
                     listed_bytes, fed[0], prefix)


def _folder_contents(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


async def archive_contents(url: str, local_dir: Path, local: bool) -> tuple[int, int | None]:
    """Objects in the archive, and their bytes where the store tells them cheaply (a local
    folder); on S3 the bytes are the archiver's counter."""
    if local:
        return await asyncio.to_thread(_folder_contents, local_dir)
    store = open_object_store(url)
    try:
        return sum([1 async for _ in store.list("")]), None
    finally:
        await store.close()


def summarize(args: Any, minutes: list[dict[str, Any]], first: dict[str, Any],
              last: dict[str, Any], hot_runs: int, rec0: dict[str, float],
              rec: dict[str, float], cpu0: dict[str, float], cpu: dict[str, float],
              reconciler_cpu: float, before: list[float], during: list[float], objects: int,
              listed_bytes: int | None, fed: int, prefix: str) -> dict[str, Any]:
    archived = rec["archived"] - rec0["archived"]
    archive_bytes = listed_bytes if listed_bytes is not None else rec["bytes"]
    spent = cpu_spent(cpu0, cpu)
    all_cpu_ms_per_run = sum(spent.values()) * 1000 / fed if fed else None
    archiver_ms = reconciler_cpu * 1000 / archived if archived else None
    # the reconciler's other duties: its CPU a second in the minutes before archiving began
    quiet = [m["reconciler_cpu_s"] for m in minutes if not m["archiving"]
             and m["archived_total"] == 0]
    baseline_s = (sum(quiet) / (60 * len(quiet))) * 60 * len(minutes) if quiet else None
    net_ms = ((reconciler_cpu - baseline_s) * 1000 / archived
              if archived and baseline_s is not None else None)
    half = minutes[len(minutes) // 2] if minutes else None
    growth = hot_bytes(last) - half["hot_bytes"] if half else None
    half_runs = fed - half["fed"] if half else 0
    growth_per_run = growth / half_runs if half_runs and growth is not None else None
    per_archived = archive_bytes / rec["archived"] if rec["archived"] else None
    per_hot = (hot_bytes(last) - hot_bytes(first)) / hot_runs if hot_runs else None
    return {
        "scenario": SCENARIO, "rate_per_s": args.rate, "minutes": args.minutes,
        "keep_seconds": args.keep, "floor_seconds": FLOOR_SECONDS,
        "store": "local folder" if args.local_store else f"S3 (SeaweedFS) {prefix}",
        "service_env": service_env(args), "runs_fed": fed, "runs_hot_at_end": hot_runs,
        "runs_archived": archived, "runs_removed": rec["removed"] - rec0["removed"],
        "archive_failures": rec["failures"], "archive_objects": objects,
        "archive_bytes": archive_bytes,
        "bytes_per_archived_run": round(per_archived) if per_archived else None,
        "bytes_per_hot_run": round(per_hot) if per_hot else None,
        "hot_growth_last_half_bytes": growth,
        "hot_growth_per_run_last_half_bytes": (round(growth_per_run, 1)
                                               if growth_per_run is not None else None),
        "database_bytes": {"start": first["database"], "end": last["database"]},
        "archiver_cpu_ms_per_run": round(archiver_ms, 3) if archiver_ms else None,
        "archiver_cpu_ms_per_run_net": round(net_ms, 3) if net_ms is not None else None,
        "cpu_ms_per_run_all": round(all_cpu_ms_per_run, 3) if all_cpu_ms_per_run else None,
        "archiver_share_of_run_cpu": (round(archiver_ms / all_cpu_ms_per_run, 3)
                                      if archiver_ms and all_cpu_ms_per_run else None),
        "cpu_seconds": spent,
        "start_lag_ms": {"before_archiving": distribution(before),
                         "during_archiving": distribution(during)},
        "gb_per_day_at_1000_per_s": {
            "archived": (round(per_archived * RUNS_PER_DAY_AT_1000 / 1e9, 1)
                         if per_archived else None),
            "hot_growth": (round(growth_per_run * RUNS_PER_DAY_AT_1000 / 1e9, 1)
                           if growth_per_run is not None else None),
            "hot_without_retention": (round(per_hot * RUNS_PER_DAY_AT_1000 / 1e9, 1)
                                      if per_hot else None)},
        "tables_end": dict(sorted(last["tables"].items(), key=lambda kv: -kv[1])),
        "indexes_end": dict(sorted(last["indexes"].items(), key=lambda kv: -kv[1]["bytes"])),
        "minutes_detail": minutes,
    }


def report(r: dict[str, Any]) -> str:
    lag = r["start_lag_ms"]
    gb = r["gb_per_day_at_1000_per_s"]
    rows = [
        ("runs fed / archived / hot at the end",
         f"{r['runs_fed']}/{int(r['runs_archived'])}/{r['runs_hot_at_end']}", ""),
        ("hot database growth, last half (MB)",
         round(r["hot_growth_last_half_bytes"] / 1e6, 2)
         if r["hot_growth_last_half_bytes"] is not None else None, "target ≈ 0 (flat)"),
        ("bytes per run, hot", r["bytes_per_hot_run"], ""),
        ("bytes per run, archived (gzip)", r["bytes_per_archived_run"], ""),
        ("archive objects / MB", f"{r['archive_objects']}/{r['archive_bytes'] / 1e6:.1f}", ""),
        ("archiver CPU ms a run (reconciler)", r["archiver_cpu_ms_per_run"], ""),
        ("  less its CPU before archiving began", r["archiver_cpu_ms_per_run_net"], ""),
        ("CPU ms a run, every process", r["cpu_ms_per_run_all"], ""),
        ("archiver / run CPU", r["archiver_share_of_run_cpu"], "target ≤ 0.10"),
        ("start lag p50/p99 ms before archiving",
         f"{lag['before_archiving']['p50']}/{lag['before_archiving']['p99']}", ""),
        ("start lag p50/p99 ms during archiving",
         f"{lag['during_archiving']['p50']}/{lag['during_archiving']['p99']}", "p99 ≤ 250"),
        ("GB/day @1000 runs/s archived", gb["archived"], ""),
        ("GB/day @1000 runs/s hot growth", gb["hot_growth"], "≈ 0"),
        ("GB/day @1000 runs/s hot, no retention", gb["hot_without_retention"], ""),
    ]
    lines = [table(f"Soak: {r['rate_per_s']:g} runs/s for {r['minutes']:g} min, keep "
                   f"{r['keep_seconds']} s, {r['store']}", rows), "", "tables at the end:"]
    lines += [f"  {name:<28}{size / 1e6:>10.2f} MB" for name, size in
              list(r["tables_end"].items())[:15]]
    lines.append("indexes at the end:")
    lines += [f"  {name:<40}{v['bytes'] / 1e6:>10.2f} MB  ({v['table']})" for name, v in
              list(r["indexes_end"].items())[:15]]
    return "\n".join(lines)


async def main(args: Any) -> dict[str, Any]:
    if args.quick:
        args.minutes = min(args.minutes, 5)
        args.keep = min(args.keep, 120)
    if args.keep < FLOOR_SECONDS:
        raise SystemExit(f"--keep must be at least the soak's floor ({FLOOR_SECONDS} s)")
    result = await run(args)
    result["machine"] = await machine()
    result["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    return result


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--rate", type=float, default=100, help="runs a second (default 100)")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--keep", type=int, default=180,
                        help="the tenant's retention in seconds (quick: 120)")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--local-store", action="store_true",
                        help="archive to a local folder instead of the S3 server from infra")
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
