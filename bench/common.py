"""Pieces every benchmark scenario shares: the servers it uses, a fresh cluster of the five
services on its own database, job submission through the public API, an in-process SDK worker,
percentiles, the machine's description, CPU readings, profiling with py-spy, and the JSON and
table output. Figures only: nothing here asserts on time."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# The administrative (superuser) URL: the benchmarks create, migrate and drop their databases.
BASE_URL = os.environ.get("OSTINATO_ADMIN_DATABASE_URL",
                          "postgresql://ostinato@127.0.0.1:15432/ostinato")
KAFKA = os.environ.get("OSTINATO_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
NOISE = ("figures from one shared machine: other work on it (and the benchmark's own client, "
         "worker and servers) competes for the same cores, so expect run-to-run noise")


def log(scenario: str, message: str) -> None:
    """A progress line on stderr (long steps print one before they start)."""
    print(f"[{scenario} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- numbers -----------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted, non-empty sequence."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def distribution(values: Iterable[float], digits: int = 1) -> dict[str, float | int | None]:
    """n, min, p50, p95, p99, max and mean of `values` (None when there are none)."""
    v = sorted(values)
    if not v:
        return {"n": 0, "min": None, "p50": None, "p95": None, "p99": None, "max": None,
                "mean": None}
    return {"n": len(v), "min": round(v[0], digits),
            "p50": round(percentile(v, 50), digits), "p95": round(percentile(v, 95), digits),
            "p99": round(percentile(v, 99), digits), "max": round(v[-1], digits),
            "mean": round(statistics.fmean(v), digits)}


def median_of(runs: Sequence[Mapping[str, Any]], *path: str) -> float | None:
    """The median over repetitions of one (nested) figure; None when no run has it."""
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, int | float):
            values.append(float(value))
    return round(statistics.median(values), 3) if values else None


# -- the machine -------------------------------------------------------------------------------


def _cpu_model() -> str:
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    with suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _git_commit() -> str | None:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


async def machine(database_url: str = BASE_URL) -> dict[str, Any]:
    """Cores, memory, CPU, load, versions of Python, PostgreSQL and the benchmarked code."""
    conn = await asyncpg.connect(database_url)
    try:
        pg = await conn.fetchval("SHOW server_version")
        sync = await conn.fetchval("SHOW synchronous_commit")
    finally:
        await conn.close()
    return {"cores": os.cpu_count(), "memory_gib": _memory_gib(), "cpu": _cpu_model(),
            "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
            "python": platform.python_version(), "platform": platform.platform(),
            "postgresql": pg, "postgresql_synchronous_commit": sync,
            "kafka_bootstrap": KAFKA, "ostinato_commit": _git_commit(), "note": NOISE}


def _proc_stat(raw: str) -> tuple[str, int, float]:
    """A /proc/<pid>/stat line: the command name, the parent pid and the user + system CPU
    seconds used so far by the process and by its children it has waited for. A PostgreSQL
    backend or autovacuum worker that exits within a window is waited for by the postmaster,
    so its CPU moves to the postmaster's count instead of vanishing from its group's sum."""
    fields = raw.rsplit(")", 1)[1].split()
    comm = raw[raw.index("(") + 1:raw.rindex(")")]
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return comm, int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process (and the children it waited for) has used so far
    (Linux /proc)."""
    return _proc_stat(Path(f"/proc/{pid}/stat").read_text())[2]


def cpu_by_process_group(services: Mapping[str, int]) -> dict[str, float]:
    """CPU seconds used so far by every process on the machine, grouped: each service (alias ->
    pid, with its children), PostgreSQL, Kafka (java), Redis, this benchmark process, the rest."""
    groups: dict[str, float] = {}
    owner = {pid: alias for alias, pid in services.items()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm, ppid, seconds = _proc_stat((entry / "stat").read_text())
        except OSError:
            continue
        pid = int(entry.name)
        if pid == os.getpid():
            group = "bench (client + SDK worker)"
        elif pid in owner or ppid in owner:
            group = owner.get(pid) or owner[ppid]
        elif comm.startswith("postgres"):
            group = "postgresql"
        elif comm == "java":
            group = "kafka"
        elif comm.startswith("redis"):
            group = "redis"  # Celery's broker
        else:
            group = "other"
        groups[group] = groups.get(group, 0.0) + seconds
    return groups


def cores_used(before: Mapping[str, float], after: Mapping[str, float],
               seconds: float) -> dict[str, float]:
    """Cores each group kept busy between two cpu_by_process_group() samples."""
    used = {g: (after[g] - before.get(g, 0.0)) / seconds for g in after}
    return {g: round(c, 2) for g, c in sorted(used.items(), key=lambda gc: -gc[1]) if c > 0.005}


def cpu_spent(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds each group used between two cpu_by_process_group() samples, the rest of the
    machine ("other") apart."""
    return {g: round(after[g] - before.get(g, 0.0), 2) for g in after if g != "other"}


def cpu_per_run_ms(cpu_seconds: Mapping[str, float], runs: int) -> float | None:
    """Milliseconds of CPU a run, all the groups of `cpu_seconds` together."""
    return round(sum(cpu_seconds.values()) * 1000 / runs, 3) if runs else None


# -- output ------------------------------------------------------------------------------------


def write_result(name: str, result: Mapping[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def table(title: str, rows: Sequence[tuple[str, Any, str]]) -> str:
    """(figure, value, target) rows as aligned text."""
    width = max(len(r[0]) for r in rows) + 2
    lines = [title, "-" * len(title)]
    for label, value, target in rows:
        shown = "-" if value is None else str(value)
        lines.append(f"{label:<{width}}{shown:>14}   {target}".rstrip())
    return "\n".join(lines)


def base_parser(doc: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller and shorter (minutes)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (median taken)")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy the services during one repetition (needs py-spy)")
    parser.add_argument("--env", action="append", default=[], metavar="OSTINATO_X=VALUE",
                        help="a setting for the services (repeatable), e.g. "
                             "OSTINATO_SCHEDULER_BATCH_SIZE=500; recorded in the result")
    return parser


def service_env(args: argparse.Namespace) -> dict[str, str]:
    """The --env settings as a dict."""
    pairs = [item.partition("=") for item in getattr(args, "env", [])]
    return {k: v for k, _, v in pairs if k}


# -- a cluster on a fresh database -------------------------------------------------------------


@dataclass
class Bench:
    """Five services (or a subset) on a fresh database and topic prefix, one tenant."""

    cluster: Any
    url: str
    key: str
    name: str
    extra: dict[str, Any] = field(default_factory=dict)

    def client(self, timeout: float = 120) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.cluster.api_url, timeout=timeout,
                                 headers={"Authorization": f"Bearer {self.key}"},
                                 limits=httpx.Limits(max_connections=16))

    def pid(self, alias: str) -> int:
        return int(self.cluster.procs[alias].pid)


def _default_reconcile() -> str:
    """The reconciler's slow checks at the product's default interval: the test suite's
    clusters run them every second, which is not what a deployment pays for."""
    import msgspec

    from ostinato.runtime.settings import Settings

    field = next(f for f in msgspec.structs.fields(Settings)
                 if f.name == "reconcile_interval_seconds")
    return str(field.default)


@asynccontextmanager
async def bench_cluster(scenario: str, *, env: Mapping[str, str] | None = None,
                        services: tuple[str, ...] | None = None) -> AsyncIterator[Bench]:
    """Create a database, migrate it, start the services on free ports, create a tenant;
    afterwards stop every process and drop the database (also on errors)."""
    from ostinato.bus import kafka as bus
    from ostinato.db.migrate import migrate
    from tests.helpers.lab.cluster import SERVICES, Cluster
    from tests.helpers.lab.load import create_tenant

    name = f"ostinato_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    prefix = f"b{uuid.uuid4().hex[:8]}."
    cluster = Cluster(database_url=url, kafka_bootstrap=KAFKA, topic_prefix=prefix,
                      log_dir=ROOT / ".cache" / "bench" / f"{scenario}-{name[-8:]}",
                      extra_env={"OSTINATO_LOG_LEVEL": "warning", "OSTINATO_DB_POOL_SIZE": "20",
                                 "OSTINATO_RECONCILE_INTERVAL_SECONDS": _default_reconcile(),
                                 **(env or {})})
    try:
        await migrate(url)
        log(scenario, f"starting services (logs: {cluster.log_dir})")
        await asyncio.to_thread(cluster.start, services or SERVICES)
        key = await create_tenant(cluster.api_url, cluster.admin_key, "bench")
        yield Bench(cluster, url, key, name)
    finally:
        await asyncio.to_thread(cluster.stop)
        # (a tree older than the helper, measured by bench.ab, keeps its topics)
        delete_topics = getattr(bus, "delete_topics_with_prefixes", None)
        with suppress(Exception):  # a broker gone: the topics stay, nothing else is wrong
            if delete_topics is not None:
                await delete_topics(KAFKA, [prefix])
        if os.environ.get("OSTINATO_BENCH_KEEP_DB") == "1":  # to read its tables afterwards
            log(scenario, f"kept database {name}")
        else:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@asynccontextmanager
async def migrated_database() -> AsyncIterator[str]:
    """A fresh migrated database for a scenario without services (its URL); dropped after."""
    from ostinato.db.migrate import migrate

    name = f"ostinato_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = BASE_URL.rpartition("/")[0] + "/" + name
        await migrate(url)
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def submit_jobs(bench: Bench, count: int, make: Callable[[int], dict[str, Any]], *,
                      batch: int = 1000, submitters: int = 4, scenario: str = "bench",
                      ) -> float:
    """Submit `count` jobs, `make(i)` each, through POST /v1/jobs/batch with `submitters`
    concurrent requests; returns the seconds it took. Progress every 10%."""
    queue: asyncio.Queue[range] = asyncio.Queue()
    for lo in range(0, count, batch):
        queue.put_nowait(range(lo, min(count, lo + batch)))
    done = 0
    step = max(batch, count // 10)
    async with bench.client() as client:

        async def submitter() -> None:
            nonlocal done
            while not queue.empty():
                part = queue.get_nowait()
                r = await client.post("/v1/jobs/batch", json={"jobs": [make(i) for i in part]})
                if r.status_code != 200:
                    raise RuntimeError(f"batch refused: {r.status_code} {r.text[:300]}")
                before, done = done, done + len(part)
                if before // step != done // step and count > 10 * batch:
                    log(scenario, f"submitted {done}/{count}")

        start = time.perf_counter()
        await asyncio.gather(*(submitter() for _ in range(submitters)))
        return time.perf_counter() - start


@asynccontextmanager
async def sdk_worker(bench: Bench, concurrency: int = 256) -> AsyncIterator[Any]:
    """An SDK worker for the `noop` task in this process, stopped (gracefully) afterwards.
    This process stands for a worker process (`Worker.run_forever`), so it settles its heap as
    that does (`eventloop.settle_heap`)."""
    from ostinato import eventloop
    from ostinato.sdk import Worker, task

    @task("noop")
    async def noop(payload: object) -> None:
        return None

    worker = Worker(bench.cluster.gateway_url, bench.key, [noop], concurrency=concurrency,
                    claim_wait_seconds=1, capture_logs=False)
    eventloop.settle_heap()
    running = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.stop()
        with suppress(Exception):
            await running


async def pg_stats(url: str) -> dict[str, int]:
    """Commits and row counters of the current database (pg_stat_database)."""
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted "
                                  "FROM pg_stat_database WHERE datname = current_database()")
        return dict(row)
    finally:
        await conn.close()


# A backend reports its row and statement counters at most once a second; one that goes idle
# within a second of its last report holds the rest for 10 s (PostgreSQL's PGSTAT_IDLE_INTERVAL).
# So counters read within 10 s of a burst's last statements miss up to a second of each
# backend's work: the scenarios wait this long before their last read.
STATS_LAG_S = 11.0


async def table_stats(url: str) -> dict[str, tuple[int, int, int, int]]:
    """Rows inserted, updated, HOT-updated and deleted so far per table of the current database
    (pg_stat_user_tables; as late as `STATS_LAG_S`)."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del "
                                "FROM pg_stat_user_tables")
        return {r["relname"]: (r["n_tup_ins"], r["n_tup_upd"], r["n_tup_hot_upd"],
                               r["n_tup_del"]) for r in rows}
    finally:
        await conn.close()


def rows_per_run(before: Mapping[str, tuple[int, ...]], after: Mapping[str, tuple[int, ...]],
                 runs: int) -> dict[str, dict[str, float]]:
    """Per table that changed: rows inserted, updated (of them HOT) and deleted per run."""
    out = {}
    for table_name, counts in sorted(after.items()):
        delta = [a - b for a, b in zip(counts, before.get(table_name, (0, 0, 0, 0)), strict=True)]
        if any(delta) and runs:
            out[table_name] = {k: round(d / runs, 2)
                               for k, d in zip(("inserted", "updated", "hot", "deleted"), delta,
                                               strict=True)}
    return out


def rows_line(rows: Mapping[str, Mapping[str, float]]) -> str:
    """`rows_per_run` on one line: table ins/upd(HOT)/del, the tables writing most first."""
    ranked = sorted(rows.items(), key=lambda kv: -(kv[1]["inserted"] + kv[1]["updated"]
                                                   + kv[1]["deleted"]))
    return "; ".join(f"{t} {r['inserted']:g}/{r['updated']:g}({r['hot']:g})/{r['deleted']:g}"
                     for t, r in ranked if r["inserted"] + r["updated"] + r["deleted"] >= 0.01)


async def statement_stats(url: str) -> dict[str, tuple[int, float]] | None:
    """Calls and execution milliseconds per statement of the current database
    (pg_stat_statements; None when the server does not preload it)."""
    conn = await asyncpg.connect(url)
    try:
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            rows = await conn.fetch(
                "SELECT query, sum(calls)::bigint AS calls, sum(total_exec_time) AS ms "
                "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
                "WHERE datname = current_database()) GROUP BY query")
        except asyncpg.PostgresError:
            return None
        return {r["query"]: (r["calls"], r["ms"]) for r in rows}
    finally:
        await conn.close()


def statements_per_run(before: Mapping[str, tuple[int, float]] | None,
                       after: Mapping[str, tuple[int, float]] | None, runs: int,
                       top: int = 20) -> dict[str, Any] | None:
    """Statements and server milliseconds per run, and the statements that cost most."""
    if before is None or after is None:
        return None
    delta = []
    for query, (calls, ms) in after.items():
        c0, m0 = before.get(query, (0, 0.0))
        if calls > c0:
            delta.append((query, calls - c0, ms - m0))
    delta.sort(key=lambda d: d[2], reverse=True)
    return {"statements": round(sum(d[1] for d in delta) / runs, 2),
            "server_ms": round(sum(d[2] for d in delta) / runs, 3),
            "top": [{"query": " ".join(q.split())[:160], "calls_per_run": round(c / runs, 3),
                     "ms_per_run": round(m / runs, 4)} for q, c, m in delta[:top]]}


# -- profiling ---------------------------------------------------------------------------------


class Profiler:
    """py-spy records the given processes (alias -> pid) for `seconds`: a flame graph (SVG) and a
    top-frames summary (own time per function, from the collapsed stacks) per process, written
    next to the results as <scenario>-profile-<alias>.svg / .txt. Absent py-spy: says so."""

    def __init__(self, scenario: str, pids: Mapping[str, int], seconds: float,
                 rate: int = 50) -> None:
        self.scenario = scenario
        self.pids = dict(pids)
        self.seconds = seconds
        self.rate = rate
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        self.exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")

    def start(self) -> Profiler:
        if not Path(self.exe).exists():
            log(self.scenario, "py-spy not installed (make bench installs it): no profile")
            return self
        RESULTS.mkdir(parents=True, exist_ok=True)
        for alias, pid in self.pids.items():
            raw = RESULTS / f"{self.scenario}-profile-{alias}.folded"
            self.procs[alias] = (subprocess.Popen(
                [self.exe, "record", "--pid", str(pid), "--rate", str(self.rate),
                 "--duration", str(max(1, int(self.seconds))), "--format", "raw",
                 "--nonblocking", "--output", str(raw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), raw)
        return self

    def finish(self) -> dict[str, list[dict[str, Any]]]:
        """Wait for the recorders; write the summaries; return alias -> top frames."""
        tops: dict[str, list[dict[str, Any]]] = {}
        for alias, (proc, raw) in self.procs.items():
            try:
                _, err = proc.communicate(timeout=self.seconds + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if not raw.exists():
                log(self.scenario, f"py-spy {alias}: {err.decode(errors='replace')[-300:]}")
                continue
            folded = raw.read_text()
            tops[alias] = top_frames(folded)
            lines = [f"{t['own_pct']:6.1f}% own {t['total_pct']:6.1f}% total  {t['frame']}"
                     for t in tops[alias]]
            ours = [f"{t['own_pct']:6.1f}%  {t['frame']}"
                    for t in top_frames(folded, within=("ostinato/", "services/"))]
            raw.with_suffix(".txt").write_text(
                f"py-spy, {alias}, {self.seconds:.0f}s at {self.rate} Hz; own = samples whose "
                "innermost frame is this function, total = samples with it anywhere on the "
                "stack (EpollSelector.select is the event loop waiting: idle)\n"
                + "\n".join(lines) + "\n\nBy the innermost Ostinato frame (library and system "
                "time charged to the Ostinato code that called it):\n" + "\n".join(ours) + "\n")
            flame = shutil.which("flamegraph.pl")
            if flame:
                with raw.with_suffix(".svg").open("wb") as out:
                    subprocess.run([flame, str(raw)], stdout=out, check=False)
        return tops


def top_frames(folded: str, count: int = 25, within: tuple[str, ...] = ()
               ) -> list[dict[str, Any]]:
    """From collapsed stacks (`a;b;c N` lines), the functions with the most own samples; with
    `within`, a sample's "own" frame is its innermost frame containing one of those strings."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        k = int(n)
        samples += k
        frames = stack.split(";")
        if within:
            frames = [f for f in frames if any(w in f for w in within)] or ["(outside)"]
        own[frames[-1]] = own.get(frames[-1], 0) + k
        for f in set(frames):
            total[f] = total.get(f, 0) + k
    ranked = sorted(own.items(), key=lambda kv: -kv[1])[:count]
    return [{"frame": f, "own_pct": round(100 * n / samples, 1),
             "total_pct": round(100 * total[f] / samples, 1)} for f, n in ranked] \
        if samples else []


# -- runs: how late they started ----------------------------------------------------------------


async def wait_succeeded(url: str, count: int, *, within: float, scenario: str,
                         where: str = "TRUE", quiet_for: float = 0.0) -> int:
    """Poll until `count` runs matching `where` succeeded (progress every ~10 s). Nothing is
    asked for the first `quiet_for` seconds (a window that cannot have ended yet): the count
    reads the whole runs table, and a measured window should not pay for it."""
    deadline = time.monotonic() + within
    await asyncio.sleep(max(0.0, min(quiet_for, within)))
    conn = await asyncpg.connect(url)
    try:
        said = time.monotonic()
        while True:
            done = await conn.fetchval(
                f"SELECT count(*) FROM runs WHERE state = 'succeeded' AND {where}")
            if done >= count or time.monotonic() > deadline:
                return int(done)
            if time.monotonic() - said > 10:
                log(scenario, f"{done}/{count} runs succeeded")
                said = time.monotonic()
            await asyncio.sleep(0.5)
    finally:
        await conn.close()


async def last_finished(url: str) -> float:
    """When the last run finished (Unix seconds, the database's clock: the same host's), so a
    rate does not carry the half-second granularity of `wait_succeeded`'s polling."""
    conn = await asyncpg.connect(url)
    try:
        return float(await conn.fetchval("SELECT extract(epoch FROM max(finished_at)) FROM runs"))
    finally:
        await conn.close()


async def lag_figures(url: str, where: str) -> dict[str, Any]:
    """For the runs matching `where`: start lag (started_at - due_at) split into the scheduler's
    part (scheduled_at - due_at) and the rest (queue, dispatch, claim: started_at -
    scheduled_at), in milliseconds; first due, last start and last finish instants."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT extract(epoch FROM started_at - due_at) * 1000 AS lag, "
            "       extract(epoch FROM scheduled_at - due_at) * 1000 AS sched, "
            "       extract(epoch FROM started_at - scheduled_at) * 1000 AS rest "
            f"FROM runs WHERE started_at IS NOT NULL AND {where}")
        span = await conn.fetchrow(
            "SELECT min(due_at) AS first_due, max(due_at) AS last_due, "
            "       max(started_at) AS last_start, max(finished_at) AS last_finish, "
            f"       count(*) AS runs FROM runs WHERE {where}")
    finally:
        await conn.close()
    return {"start_lag_ms": distribution(float(r["lag"]) for r in rows),
            "scheduler_lag_ms": distribution(float(r["sched"]) for r in rows),
            "queue_to_start_ms": distribution(float(r["rest"]) for r in rows),
            "span": dict(span)}


def repeat_count(args: argparse.Namespace) -> int:
    return args.repeat if args.repeat is not None else (1 if args.quick else 3)
