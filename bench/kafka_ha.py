"""Kafka with three brokers under load (issue 39): the leader of the busiest partition of the
runs topic killed with -9 (started again once jobs submitted after the kill have run), then a
whole broker down for a minute; prints one table and writes it to bench/results/kafka_ha.json.

    .venv/bin/python -m bench.kafka_ha [--quick] [--rate 100] [--down-seconds 60]

Needs PostgreSQL (`infra/up.sh postgres`). Starts its own three-node KRaft cluster
(infra/kafka/cluster.sh on ports and a data folder of its own, removed at the end), the five
services on it with OSTINATO_KAFKA_REPLICATION_FACTOR=3 (min.insync.replicas 2) and two worker
processes (tests/faults/worker_proc.py: fenced, at-most-once effects), on a fresh database.
Jobs arrive through POST /v1/jobs/batch all along (retried with their idempotency keys).

Figures per fault, each measured from the kill (monotonic clock; events observed, never a
window assumed): `new leader` = until the partition's metadata names another leader;
`first run` = until the first job accepted after the kill has succeeded (its run went through
the topics while the broker was down); `rejoined` = from the restart until the broker is back
in the partition's in-sync replicas. At the end, the fault suite's check over every run:
`lost` = accepted jobs without a succeeded run, `duplicated` = effects applied more than once,
plus the end check's problems. --quick: 60 jobs/s, the broker down 20 s instead of 60.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

from bench.common import BASE_URL, ROOT, machine, table, write_result
from ostinato.db.migrate import migrate
from ostinato.telemetry.logging import configure_logging
from tests.helpers.lab.brokers import KafkaTrio
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import FAULT_ENV, Lab
from tests.helpers.lab.load import Load
from tests.helpers.waiting import until


def say(message: str) -> None:
    print(f"[kafka_ha] {message}", flush=True)


class Scenario:
    def __init__(self, args: argparse.Namespace, lab: Lab, trio: KafkaTrio, due: str) -> None:
        self.args, self.lab, self.trio, self.due = args, lab, trio, due
        self.load: Load | None = None

    async def succeeded(self, job_ids: list[str]) -> int:
        return int(await self.lab.db.fetchval(
            "SELECT count(*) FROM runs WHERE state = 'succeeded' AND job_id = ANY($1::uuid[])",
            [uuid.UUID(j) for j in job_ids]))

    async def fault(self, name: str, down_for: float) -> dict[str, Any]:
        """Kill -9 the leader of the busiest partition of the runs topic, keep it down at
        least `down_for` s (and until a job accepted after the kill has run), start it again."""
        assert self.load is not None
        load = self.load
        partition, offset = await self.trio.busiest(self.due)
        victim = (await self.trio.partitions(self.due))[partition]["leader"]
        accepted = len(load.accepted)
        say(f"{name}: kill -9 broker {victim}, leader of {self.due}[{partition}] "
            f"({offset} messages)")
        killed = time.monotonic()
        await asyncio.to_thread(self.trio.kill, victim)

        async def new_leader() -> int:
            leader = (await self.trio.partitions(self.due))[partition]["leader"]
            return leader if leader not in (victim, -1) else 0

        leader = await until(new_leader, 120, "a new leader")
        elected = time.monotonic() - killed

        async def first_after() -> bool:
            later = list(load.accepted.values())[accepted:]
            return bool(later) and await self.succeeded(later) > 0

        await until(first_after, 180, "a job accepted after the kill to run")
        first_run = time.monotonic() - killed
        written = (await self.trio.end_offsets(self.due))[partition] - offset
        await asyncio.sleep(max(0.0, down_for - (time.monotonic() - killed)))
        down = time.monotonic() - killed
        restarted = time.monotonic()
        await asyncio.to_thread(self.trio.up)

        async def in_sync() -> bool:
            return victim in (await self.trio.partitions(self.due))[partition]["isr"]

        await until(in_sync, 180, f"broker {victim} back in sync")
        rejoined = time.monotonic() - restarted
        say(f"{name}: new leader {leader} after {elected:.1f}s, first run after {first_run:.1f}s,"
            f" {written} messages written to the partition while down, down {down:.0f}s, "
            f"back in sync {rejoined:.1f}s after the restart")
        return {"fault": name, "victim": victim, "partition": partition, "new_leader": leader,
                "new_leader_s": round(elected, 2), "first_run_s": round(first_run, 2),
                "written_while_down": written, "down_s": round(down, 1),
                "rejoined_s": round(rejoined, 2)}

    async def run(self) -> dict[str, Any]:
        lab = self.lab
        await lab.start()
        before = await self.trio.partitions(self.due)
        replicas = sorted({len(p["replicas"]) for p in before.values()})
        min_isr = await self.trio.topic_config(self.due, "min.insync.replicas")
        say(f"{self.due}: replicas {replicas}, min.insync.replicas {min_isr}")
        for name in ("w1", "w2"):
            await lab.worker(name, concurrency=32)
        self.load = Load(lab.cluster.api_url, lab.api_key, rate=self.args.rate, batch=10).start()
        faults = []
        try:
            await asyncio.sleep(self.args.baseline)
            faults.append(await self.fault("leader_kill", 0))
            await asyncio.sleep(self.args.settle)
            faults.append(await self.fault("broker_down", self.args.down_seconds))
            await asyncio.sleep(self.args.settle)
        finally:
            await self.load.stop()
        load = self.load
        drain_started = time.monotonic()
        missing, open_runs = await wait_settled(lab.db, load.job_ids, self.args.drain)
        verdict = await verify(lab.db, load.job_ids)
        lost = (len(verdict.jobs_without_run) + len(verdict.jobs_not_succeeded)
                + len(load.abandoned))
        duplicated = len(set(verdict.duplicate_effect_keys) | set(verdict.duplicate_effect_runs))
        return {"jobs": len(load.job_ids), "abandoned": len(load.abandoned),
                "failed_requests": load.failed_requests, "replicas": replicas,
                "min_insync_replicas": min_isr, "faults": faults, "lost": lost,
                "duplicated": duplicated, "unsettled": {"missing": missing, "open": open_runs},
                "drain_s": round(time.monotonic() - drain_started, 1),
                "problems": verdict.problems()}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    name = f"ostinato_kafka_ha_{uuid.uuid4().hex[:8]}"
    admin = Db(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    run_dir = ROOT / ".cache" / "kafka_ha" / time.strftime("%Y%m%d-%H%M%S")
    trio = KafkaTrio(Path(run_dir) / "kafka-ha")
    prefix = f"h{uuid.uuid4().hex[:8]}."
    cluster = Cluster(database_url=url, kafka_bootstrap=trio.bootstrap, topic_prefix=prefix,
                      log_dir=run_dir / "logs",
                      extra_env={**FAULT_ENV, "OSTINATO_LOG_LEVEL": "warning",
                                 "OSTINATO_KAFKA_REPLICATION_FACTOR": "3",
                                 "OSTINATO_KAFKA_TENANT_BOOTSTRAP": ""})
    lab = Lab(cluster=cluster, db=Db(url))
    try:
        await migrate(url)
        say(f"starting three brokers on {trio.bootstrap}")
        say(f"brokers up in {await asyncio.to_thread(trio.up):.1f}s")
        result = await Scenario(args, lab, trio, f"{prefix}ostinato.runs.due").run()
        return {**result, "quick": args.quick, "rate": args.rate,
                "machine": await machine(BASE_URL)}
    finally:
        try:
            await lab.close()
        finally:
            with suppress(Exception):
                await asyncio.to_thread(trio.down)
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', within=60)
            await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="60 jobs/s, a broker down 20 s")
    parser.add_argument("--rate", type=float, default=None, help="jobs/s (100; --quick: 60)")
    parser.add_argument("--down-seconds", type=float, default=None,
                        help="how long the whole broker stays down (60; --quick: 20)")
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of load first")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between faults")
    parser.add_argument("--drain", type=float, default=180.0, help="max seconds to drain")
    args = parser.parse_args()
    args.rate = args.rate or (60.0 if args.quick else 100.0)
    args.down_seconds = args.down_seconds if args.down_seconds is not None else (
        20.0 if args.quick else 60.0)
    configure_logging("bench", "warning")
    result = asyncio.run(amain(args))
    rows: list[tuple[str, Any, str]] = []
    for f in result["faults"]:
        rows += [(f"{f['fault']}: new leader (s)", f["new_leader_s"], "seconds"),
                 (f"{f['fault']}: first run after the kill (s)", f["first_run_s"], "seconds"),
                 (f"{f['fault']}: broker down (s)", f["down_s"], ""),
                 (f"{f['fault']}: back in sync after restart (s)", f["rejoined_s"], "")]
    rows += [("jobs accepted", result["jobs"], ""), ("lost", result["lost"], "0"),
             ("duplicated", result["duplicated"], "0"),
             ("end-check problems", len(result["problems"]), "0")]
    print(table("Kafka, three brokers: leader kill and a broker down", rows))
    path = write_result("kafka_ha", result)
    print(f"written to {path}")
    bad = result["lost"] or result["duplicated"] or result["problems"] or result["abandoned"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
