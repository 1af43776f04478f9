"""The worker SDK's own CPU per attempt, in process and without servers: --attempts claimed
runs of a no-op async handler through the SDK's attempt runner (`ostinato.sdk.execution`),
400 started at a time as a claim delivers them, the outcome queued for the reporter. What is
left of the worker's per-run cost once HTTP and the gateway are taken away: contexts, log
fields, trace context, tasks, the wait on the handler.

    .venv/bin/python -m bench.sdk_attempt [--quick] [--attempts 20000] [--repeat 5]

Variants (each a median over the repetitions, CPU time of this process):
  plain       no run trace, captured logs off (what bench/burst.py's worker does)
  traced run  each claim carries a traceparent (the handler continues the run's trace)
  capture     captured logs on, the SDK's default (each attempt's log lines go to the gateway)

No span is recorded here (no OpenTelemetry SDK provider is installed), as in the benchmarks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from bench.common import base_parser, log, table, write_result
from ostinato import eventloop
from ostinato.sdk.context import Custody, RunContext
from ostinato.sdk.execution import AttemptRunner
from ostinato.sdk.tasks import Registered
from ostinato.wire.worker import ClaimedRun

SCENARIO = "sdk_attempt"
BATCH = 400  # a claim's worth of runs started together
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
VARIANTS = {"plain": (None, False), "traced run": (TRACEPARENT, False),
            "capture": (None, True)}


class _Outcomes:
    """The reporter's queueing side: counts what the runner hands over."""

    def __init__(self) -> None:
        self.completed = 0

    def complete(self, *args: Any, **kwargs: Any) -> None:
        self.completed += 1

    def fail(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a no-op attempt failed: {args}")

    def release(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing is released here")


async def _noop(payload: Any) -> None:
    return None


async def once(attempts: int, traceparent: str | None, capture: bool) -> float:
    """CPU µs per attempt for `attempts` runs of a no-op handler."""
    outcomes = _Outcomes()
    custody = Custody(lambda *a: None)  # type: ignore[arg-type, return-value]
    runner = AttemptRunner(outcomes, custody, concurrency=BATCH,  # type: ignore[arg-type]
                           on_slot_freed=lambda: None, capture_logs=capture)
    runner.open(needs_threads=False)
    now = datetime.now(UTC)
    claims = [ClaimedRun(run_id=str(uuid.uuid4()), job_id=str(uuid.uuid4()),
                         tenant_id=str(uuid.uuid4()), task="noop", attempt=1, fencing_token=1,
                         lease_expires_at=now, lease_ttl_seconds=30.0, scheduled_for=now,
                         idempotency_key="key", traceparent=traceparent)
              for _ in range(attempts)]
    handler = Registered(fn=_noop, is_async=True)
    started = time.process_time()
    for i in range(0, attempts, BATCH):
        sent_at = time.monotonic()
        for claim in claims[i:i + BATCH]:
            ctx = RunContext.from_claim(claim, sent_at=sent_at)
            custody.add(ctx)
            runner.start(ctx, handler, claim.payload, claim.traceparent)
        await asyncio.gather(*runner.runners)
    spent = time.process_time() - started
    runner.close()
    if outcomes.completed != attempts:
        raise RuntimeError(f"{outcomes.completed} of {attempts} attempts completed")
    return round(spent / attempts * 1e6, 1)


async def main(args: Any) -> dict[str, Any]:
    attempts = args.attempts or (5_000 if args.quick else 20_000)
    repeat = args.repeat or (3 if args.quick else 5)
    runs: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for rep in range(1, repeat + 1):
        for name, (traceparent, capture) in VARIANTS.items():  # interleaved: the same drift
            runs[name].append(await once(attempts, traceparent, capture))
        log(SCENARIO, f"#{rep}: " + ", ".join(f"{n} {v[-1]} µs" for n, v in runs.items()))
    median = {name: sorted(v)[len(v) // 2] for name, v in runs.items()}
    return {"scenario": SCENARIO, "attempts": attempts, "repetitions": repeat,
            "cpu_us_per_attempt": median, "runs": runs}


def report(r: dict[str, Any]) -> str:
    rows = [(f"{name} (CPU µs an attempt)", value, "")
            for name, value in r["cpu_us_per_attempt"].items()]
    return table(f"SDK attempt: {r['attempts']} no-op attempts, median of {r['repetitions']}",
                 rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--attempts", type=int, default=None)
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
