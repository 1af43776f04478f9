"""Start and await at scale (issue 40 item 2): 10,000 clients awaiting runs at once through
`GET /v1/runs/{id}/result?wait=60s`. Prints what they cost the api and PostgreSQL while they
wait (api CPU, statements and commits per second, against the same window with nobody
waiting), and the latency from each run's end (its `finished_at`, the database's clock) to its
waiters' answers (this host's clock: the same machine), p50/p99/max.

Services: api, scheduler, dispatcher, worker-gateway (no reconciler) on a fresh database. --runs
one-off no-op jobs (1,000) are submitted and left unstarted (no worker yet); --waiters long polls
(10,000; several per run) are opened, each on its own HTTP/1.1 connection (asyncio streams,
no HTTP library: the client must not be what is measured); once the api's
`ostinato_result_waiters` gauge shows them all, the window is measured; then the SDK worker
starts, the runs succeed and every waiter is answered.

    .venv/bin/python -m bench.await_results [--quick] [--runs N] [--waiters N] [--window S]
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import time
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from bench.common import (
    STATS_LAG_S,
    base_parser,
    bench_cluster,
    cpu_seconds,
    distribution,
    log,
    machine,
    pg_stats,
    sdk_worker,
    statement_stats,
    submit_jobs,
    table,
    write_result,
)

SCENARIO = "await_results"
WAIT = "60s"  # longer than the window: no waiter asks again while it is measured


class Waiter:
    """One long poll on its own connection: the raw HTTP/1.1 exchange, the time of the
    answer and its body."""

    def __init__(self, host: str, port: int, key: str, run_id: uuid.UUID) -> None:
        self.host, self.port, self.key, self.run_id = host, port, key, run_id
        self.answered_at: float | None = None
        self.body: dict[str, Any] | None = None
        self.status = 0
        self.retries = 0  # 503s and dropped connections asked again
        self.repolls = 0  # waits that ended first, asked again
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.StreamReader | None = None

    async def send(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        self._writer.write((f"GET /v1/runs/{self.run_id}/result?wait={WAIT} HTTP/1.1\r\n"
                            f"Host: {self.host}:{self.port}\r\n"
                            f"Authorization: Bearer {self.key}\r\n"
                            "Accept: application/json\r\n\r\n").encode())
        await self._writer.drain()

    async def answer(self) -> None:
        """The answer; a 503 (the shared database out of connections, say) is asked again
        after its Retry-After, as the client does."""
        while True:
            assert self._reader is not None and self._writer is not None
            try:
                head = await self._reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):  # dropped: ask again
                self.retries += 1
                await asyncio.sleep(1.0)
                await self.send()
                continue
            self.answered_at = time.time()
            lines = head.decode("latin-1").split("\r\n")
            self.status = int(lines[0].split()[1])
            length = next(int(line.split(":", 1)[1]) for line in lines
                          if line.lower().startswith("content-length:"))
            self.body = json.loads(await self._reader.readexactly(length))
            self._writer.close()
            if self.status == 503:
                self.retries += 1
                await asyncio.sleep(1.0)
            elif self.status == 200 and not self.body.get("done"):
                self.repolls += 1  # the wait (60 s) ended first: ask again, as the client does
            else:
                return
            await self.send()


async def api_waiters(api_url: str) -> float:
    """The api's `ostinato_result_waiters` (-1 when it did not answer in time: busy)."""
    try:
        async with httpx.AsyncClient(base_url=api_url, timeout=60) as http:
            text = (await http.get("/metrics")).text
    except httpx.TimeoutException:
        return -1.0
    for line in text.splitlines():
        if line.startswith("ostinato_result_waiters "):
            return float(line.split()[1])
    return 0.0


async def registered(api_url: str, count: int, answers: list[asyncio.Task[None]],
                     polls: list[Waiter]) -> None:
    """Until the api has `count` waiters registered (none may be answered meanwhile)."""
    while await api_waiters(api_url) < count * 0.95:  # a few may be between two polls
        early = next((i for i, a in enumerate(answers) if a.done()), None)
        if early is not None:
            failed = answers[early].exception()
            raise RuntimeError(f"a waiter was answered before any run ended: "
                               f"{failed!r} {polls[early].status} {polls[early].body}")
        await asyncio.sleep(0.5)


async def window(bench: Any, seconds: float) -> dict[str, float]:
    """Per second over `seconds`: the api's CPU, PostgreSQL statements (pg_stat_statements,
    every backend of the database: the other services' idle polls too) and commits."""
    await asyncio.sleep(STATS_LAG_S)  # what ran just before has reached the counters
    api = bench.pid("api")
    cpu0, stmts0, pg0 = cpu_seconds(api), await statement_stats(bench.url), await pg_stats(
        bench.url)
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - started
    cpu1, stmts1, pg1 = cpu_seconds(api), await statement_stats(bench.url), await pg_stats(
        bench.url)
    calls = None
    if stmts0 is not None and stmts1 is not None:
        calls = sum(c for c, _ in stmts1.values()) - sum(c for c, _ in stmts0.values())
    return {"api_cpu_percent": round(100 * (cpu1 - cpu0) / elapsed, 2),
            "statements_per_s": round(calls / elapsed, 2) if calls is not None else -1.0,
            "commits_per_s": round((pg1["xact_commit"] - pg0["xact_commit"]) / elapsed, 2)}


async def run(runs: int, waiters: int, seconds: float) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:  # the api process (started below) inherits it too
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    env = {"OSTINATO_API_RATE_PER_SECOND": "1000000", "OSTINATO_API_BURST": "1000000",
           "OSTINATO_DB_POOL_SIZE": "8"}  # waiting holds none; the answers need few
    async with bench_cluster(SCENARIO, env=env, services=(
            "api", "scheduler", "dispatcher", "worker_gateway")) as bench:
        await submit_jobs(bench, runs, lambda i: {"name": f"await-{i}", "task": "noop"},
                          scenario=SCENARIO)
        conn = await asyncpg.connect(bench.url)
        try:
            while (n := await conn.fetchval("SELECT count(*) FROM runs")) < runs:
                log(SCENARIO, f"{n}/{runs} runs created")
                await asyncio.sleep(1)
            run_ids = [r["id"] for r in await conn.fetch("SELECT id FROM runs")]
        finally:
            await conn.close()
        log(SCENARIO, f"idle window ({seconds:g} s, nobody waiting)")
        idle = await window(bench, seconds)

        url = urlsplit(bench.cluster.api_url)
        polls = [Waiter(url.hostname or "127.0.0.1", url.port or 80, bench.key,
                        run_ids[i % len(run_ids)]) for i in range(waiters)]
        opened = time.perf_counter()
        answers: list[asyncio.Task[None]] = []
        for lo in range(0, waiters, 1000):  # a thousand at a time: the listen backlog is finite
            await asyncio.gather(*(p.send() for p in polls[lo:lo + 1000]))
            answers += [asyncio.create_task(p.answer()) for p in polls[lo:lo + 1000]]
            await registered(bench.cluster.api_url, len(answers), answers, polls)
            log(SCENARIO, f"{len(answers)} waiters registered")
        opening_s = time.perf_counter() - opened
        log(SCENARIO, f"{waiters} waiters registered in {opening_s:.1f} s; "
                      f"window ({seconds:g} s)")
        repolls = sum(p.repolls for p in polls)
        waiting = await window(bench, seconds)
        waiting["repolls_per_s"] = round((sum(p.repolls for p in polls) - repolls) / seconds, 1)
        assert not any(a.done() for a in answers), "answered while no run ended"

        log(SCENARIO, "starting the worker: the runs end, the waiters are answered")
        cpu_before = cpu_seconds(bench.pid("api"))
        async with sdk_worker(bench):
            await asyncio.gather(*answers)
        answer_cpu_ms = 1000 * (cpu_seconds(bench.pid("api")) - cpu_before) / waiters
        bad = [p for p in polls if p.status != 200 or not (p.body or {}).get("done")]
        lags = [1000 * (p.answered_at - datetime.fromisoformat(p.body["finished_at"])
                        .timestamp()) for p in polls
                if p.answered_at is not None and p.body and p.body.get("finished_at")]
        ends = [datetime.fromisoformat(p.body["finished_at"]).timestamp() for p in polls
                if p.body and p.body.get("finished_at")]
        answered = [p.answered_at for p in polls if p.answered_at is not None]
        return {"runs": runs, "waiters": waiters, "window_s": seconds,
                "registering_s": round(opening_s, 1),
                "retried_503": sum(p.retries for p in polls),
                "idle": idle, "waiting": waiting, "not_done_answers": len(bad),
                "end_to_answer_ms": distribution(lags),
                "api_cpu_ms_per_answer": round(answer_cpu_ms, 3),
                "load_average": list(os.getloadavg()),
                "ends_span_ms": round(1000 * (max(ends) - min(ends)), 1) if ends else None,
                "answers_span_ms": round(1000 * (max(answered) - min(answered)), 1)
                if answered else None}


async def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None, help="runs awaited (1,000)")
    parser.add_argument("--waiters", type=int, default=None,
                        help="long polls at once (10,000; --quick 2,000)")
    parser.add_argument("--window", type=float, default=None,
                        help="seconds each window is measured (20; --quick 10)")
    args = parser.parse_args()
    runs = args.runs or (200 if args.quick else 1000)
    waiters = args.waiters or (2000 if args.quick else 10_000)
    seconds = args.window or (10.0 if args.quick else 20.0)
    found = await run(runs, waiters, seconds)
    idle, waiting = found["idle"], found["waiting"]
    lag = found["end_to_answer_ms"]
    print(table(f"{waiters:,} clients awaiting {runs:,} runs (long polls, wait={WAIT})", [
        ("opening and registering the waiters", found["registering_s"],
         f"s ({found['retried_503']} 503s or drops asked again)"),
        ("api CPU, nobody waiting", idle["api_cpu_percent"], "% of a core"),
        ("api CPU, all waiting", waiting["api_cpu_percent"], "% of a core"),
        ("PostgreSQL statements/s, nobody waiting", idle["statements_per_s"],
         "every service's idle polls"),
        ("PostgreSQL statements/s, all waiting", waiting["statements_per_s"],
         f"with {waiting['repolls_per_s']} polls/s asked again (a wait ends after 60 s)"),
        ("commits/s, nobody waiting / all waiting",
         f"{idle['commits_per_s']} / {waiting['commits_per_s']}", ""),
        ("run end → answer p50", lag.get("p50"), "ms"),
        ("run end → answer p99", lag.get("p99"), "ms"),
        ("run end → answer max", lag.get("max"), "ms"),
        ("runs' ends spread over", found["ends_span_ms"], "ms (first to last finished_at)"),
        ("answers spread over", found["answers_span_ms"], "ms (first to last answer)"),
        ("answers not done", found["not_done_answers"], "(0: every waiter got its run's end)"),
        ("api CPU per answer", found["api_cpu_ms_per_answer"],
         "ms"),
        ("load average at the end (1 min)", round(found["load_average"][0], 1),
         "(this machine has 2 cores: latency is queueing for them)"),
    ]))
    write_result(SCENARIO, {**found, "machine": await machine()})


if __name__ == "__main__":
    asyncio.run(main())
