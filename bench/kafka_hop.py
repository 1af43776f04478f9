"""What one wake-up costs the broker and the two clients it passes: the CPU of a message sent
by the outbox relay's producer and read by a service's consumer, one at a time (issue 19).

No services: a topic of its own on the broker (`infra/up.sh kafka`), the product's producer
(`bus/kafka.py make_producer`) and consumer (`bus/consumer.py BatchConsumer`, its fetch
settings), --hops wake-ups (1,000; --quick 500), each sent after the last one was handled, as a
quiet service sends them. The broker's CPU is its threads' CPU over the hops less what it spends
idle over as long (measured just before); the JIT compiler's threads are printed apart: they
are a young broker's, not a hop's. The clients' CPU is this process's (producer and consumer in
one process, so a hop's Python on both sides).

    .venv/bin/python -m bench.kafka_hop [--quick] [--hops 1000] [--repeat 3]
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import KAFKA, _proc_stat, log, machine, table, write_result

SCENARIO = "kafka_hop"


def broker_cpu() -> tuple[float, float]:
    """CPU seconds of every `java` process on the machine (the broker): (all threads but the JIT
    compiler's, the JIT compiler's)."""
    work = jit = 0.0
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or (proc / "comm").read_text().strip() != "java":
                continue
            for task in (proc / "task").iterdir():
                thread, _, seconds = _proc_stat((task / "stat").read_text())
                if "Compiler" in thread:
                    jit += seconds
                else:
                    work += seconds
        except OSError:  # a process or thread gone meanwhile
            continue
    return work, jit


async def once(hops: int, partitions: int) -> dict[str, float]:
    from ostinato.bus.codec import Envelope, encode
    from ostinato.bus.consumer import BatchConsumer, Delivered
    from ostinato.bus.kafka import delete_topics_with_prefixes, ensure_topics, make_producer
    from ostinato.bus.topics import Topics, tenant_key
    from ostinato.domain import events as ev

    prefix = f"bench-hop-{uuid.uuid4().hex[:8]}."
    topic = Topics(prefix=prefix).ready("default")
    tenant = uuid.uuid4()
    wakeup = (encode(Envelope(event_id=uuid.uuid4(), stream_id=uuid.uuid4(), version=2,
                              tenant_id=tenant, occurred_at=datetime.now(UTC), actor="bench",
                              epoch=None, traceparent=None, event=ev.RunQueued(pool="default"),
                              coalesced=100)),
              tenant_key(tenant))
    await ensure_topics(KAFKA, [topic], partitions=partitions)
    handled = asyncio.Event()

    async def handler(delivered: list[Delivered]) -> None:
        handled.set()

    producer = make_producer(KAFKA, "bench-hop")
    consumer = BatchConsumer(bootstrap=KAFKA, group=prefix + "group", topics=[topic],
                             handler=handler, commit_every_seconds=1.0)
    await producer.start()
    await consumer.start()
    task = asyncio.create_task(consumer.run())
    try:
        # a first hop waits out the group's assignment (the group reads from the earliest
        # offset, so it is not lost) and settles the fetch loop
        await hop(producer, topic, wakeup, handled)
        await asyncio.sleep(2.0)
        idle_s = 5.0
        work0, _ = broker_cpu()
        await asyncio.sleep(idle_s)
        idle = (broker_cpu()[0] - work0) / idle_s
        work0, jit0 = broker_cpu()
        client0, began = time.process_time(), time.perf_counter()
        for _ in range(hops):
            await hop(producer, topic, wakeup, handled)
        elapsed = time.perf_counter() - began
        client = time.process_time() - client0
        work1, jit1 = broker_cpu()
    finally:
        consumer.stop()
        await task
        await consumer.close()
        await producer.stop()
        await delete_topics_with_prefixes(KAFKA, [prefix])
    return {"hops_per_s": round(hops / elapsed, 1),
            "broker_idle_cores": round(idle, 4),
            "broker_us_per_hop": round((work1 - work0 - idle * elapsed) / hops * 1e6, 1),
            "broker_jit_us_per_hop": round((jit1 - jit0) / hops * 1e6, 1),
            "clients_us_per_hop": round(client / hops * 1e6, 1)}


async def hop(producer: Any, topic: str, wakeup: tuple[bytes, bytes],
              handled: asyncio.Event) -> None:
    """One wake-up sent (acknowledged, as the relay waits for it) and handled."""
    handled.clear()
    await (await producer.send(topic, value=wakeup[0], key=wakeup[1]))
    await handled.wait()


async def main(args: Any) -> dict[str, Any]:
    hops = args.hops or (500 if args.quick else 1000)
    runs = []
    for rep in range(1, (args.repeat or 3) + 1):
        runs.append(await once(hops, args.partitions))
        log(SCENARIO, f"#{rep}: {runs[-1]}")
    median = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}
    return {"scenario": SCENARIO, "hops": hops, "partitions": args.partitions,
            "repetitions": len(runs), "median": median, "runs": runs, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    m = r["median"]
    rows = [("broker CPU a wake-up, µs (idle deducted)", m["broker_us_per_hop"], ""),
            ("… the JIT compiler's meanwhile, µs", m["broker_jit_us_per_hop"], "a young broker's"),
            ("producer + consumer CPU a wake-up, µs", m["clients_us_per_hop"], ""),
            ("broker idle, cores", m["broker_idle_cores"], ""),
            ("wake-ups a second, one at a time", m["hops_per_s"], "")]
    return table(f"A wake-up through Kafka: {r['hops']} one at a time, median of "
                 f"{r['repetitions']}", rows)


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop
    from ostinato.telemetry.logging import configure_logging

    parser = base_parser(__doc__)
    parser.add_argument("--hops", type=int, default=None)
    parser.add_argument("--partitions", type=int, default=12, help="of the topic (the services' "
                        "default, OSTINATO_TOPIC_PARTITIONS)")
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
