"""Which S3 client library the object store uses (issue 38): each candidate puts and gets 1 KiB,
64 KiB and 1 MiB objects on the same real S3 server in one run (the local SeaweedFS,
`infra/up.sh s3`), one request at a time (latency p50/p99 and this process's CPU a request) and
--concurrency at a time (requests/s and CPU a request). CPU is this process's, every thread
counted (`time.process_time`): obstore does its HTTP in Rust threads, aiobotocore in Python on
the event loop. Also printed: each candidate's installed size with its dependencies.

Candidates: obstore (Rust's object_store crate) and aiobotocore (botocore over aiohttp), as
`pip install obstore aiobotocore` brings them (the chosen one is in pyproject.toml, the other in
the `bench` extra); a missing one is skipped and said so. Figures only, nothing asserted.

    . infra/env.sh && .venv/bin/python -m bench.object_store [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata as md
import os
import re
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from bench.common import distribution, log, table, write_result

SCENARIO = "object_store"
SIZES = {"1KiB": 1024, "64KiB": 64 * 1024, "1MiB": 1024 * 1024}
OPS = {"1KiB": 1000, "64KiB": 500, "1MiB": 100}  # a phase's requests, per size (--quick: /4)


class Candidate(Protocol):
    name: str

    async def put(self, key: str, data: bytes) -> None: ...
    async def get(self, key: str) -> bytes: ...
    async def delete(self, key: str) -> None: ...
    async def close(self) -> None: ...


class Obstore:
    name = "obstore"

    def __init__(self, endpoint: str, bucket: str, key_id: str, secret: str) -> None:
        import obstore
        from obstore.store import S3Store

        self._ob = obstore
        self.store = S3Store(bucket, endpoint=endpoint, region="us-east-1",
                             access_key_id=key_id, secret_access_key=secret,
                             virtual_hosted_style_request=False,
                             client_options={"allow_http": True, "timeout": "30s"})

    async def put(self, key: str, data: bytes) -> None:
        await self._ob.put_async(self.store, key, data)

    async def get(self, key: str) -> bytes:
        result = await self._ob.get_async(self.store, key)
        return bytes(await result.bytes_async())

    async def delete(self, key: str) -> None:
        await self._ob.delete_async(self.store, key)

    async def close(self) -> None:
        return None


class Aiobotocore:
    name = "aiobotocore"

    def __init__(self, endpoint: str, bucket: str, key_id: str, secret: str) -> None:
        self.endpoint, self.bucket, self.key_id, self.secret = endpoint, bucket, key_id, secret
        self.client: Any = None
        self._cm: Any = None

    async def open(self) -> None:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        self._cm = get_session().create_client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=self.key_id, aws_secret_access_key=self.secret,
            config=AioConfig(s3={"addressing_style": "path"}, connect_timeout=30,
                             read_timeout=30, max_pool_connections=64))
        self.client = await self._cm.__aenter__()

    async def put(self, key: str, data: bytes) -> None:
        await self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    async def get(self, key: str) -> bytes:
        response = await self.client.get_object(Bucket=self.bucket, Key=key)
        async with response["Body"] as body:
            return bytes(await body.read())

    async def delete(self, key: str) -> None:
        await self.client.delete_object(Bucket=self.bucket, Key=key)

    async def close(self) -> None:
        await self._cm.__aexit__(None, None, None)


async def make(name: str, endpoint: str, bucket: str, key_id: str, secret: str
               ) -> Candidate | None:
    try:
        if name == "obstore":
            return Obstore(endpoint, bucket, key_id, secret)
        client = Aiobotocore(endpoint, bucket, key_id, secret)
        await client.open()
        return client
    except ImportError as exc:
        log(SCENARIO, f"{name} is not installed ({exc}): skipped")
        return None


def installed_size(dist_name: str) -> dict[str, Any]:
    """The distribution and every distribution it requires (markers ignored: an upper bound),
    with their installed bytes (from RECORD)."""
    seen: dict[str, int] = {}
    todo = [dist_name]
    while todo:
        name = re.split(r"[\s\[<>=!~;(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if not name or name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = sum((f.size or 0) for f in (dist.files or []))
        todo.extend(r for r in (dist.requires or []) if "extra ==" not in r)
    return {"version": md.version(dist_name), "distributions": sorted(seen),
            "installed_mib": round(sum(seen.values()) / 2**20, 1)}


async def timed(op: Callable[[int], Awaitable[Any]], count: int, concurrency: int
                ) -> dict[str, Any]:
    """`count` calls of op(i), `concurrency` at a time: wall, CPU and each call's latency."""
    latencies: list[float] = []
    next_i = 0

    async def lane() -> None:
        nonlocal next_i
        while next_i < count:
            i = next_i
            next_i += 1
            t0 = time.perf_counter()
            await op(i)
            latencies.append((time.perf_counter() - t0) * 1000)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    lat = distribution(latencies, 2)
    return {"ops": count, "ops_per_s": round(count / wall, 1),
            "cpu_us_per_op": round(cpu / count * 1e6, 1), "latency_ms_p50": lat["p50"],
            "latency_ms_p99": lat["p99"]}


async def measure(client: Candidate, prefix: str, size_name: str, count: int,
                  concurrency: int) -> dict[str, Any]:
    data = os.urandom(SIZES[size_name])
    keys = [f"{prefix}/{client.name}/{size_name}/{i}" for i in range(count)]

    async def put(i: int) -> None:
        await client.put(keys[i], data)

    async def get(i: int) -> None:
        got = await client.get(keys[i])
        if len(got) != len(data):
            raise RuntimeError(f"{client.name}: read {len(got)} bytes of {keys[i]}, "
                               f"wrote {len(data)}")

    for i in range(min(20, count)):  # warm the connection pool
        await put(i)
        await get(i)
    figures = {"put_1": await timed(put, count, 1), "get_1": await timed(get, count, 1),
               f"put_{concurrency}": await timed(put, count, concurrency),
               f"get_{concurrency}": await timed(get, count, concurrency)}
    for key in keys:
        await client.delete(key)
    return figures


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase in runs[0]:
        out[phase] = {k: round(statistics.median(r[phase][k] for r in runs), 2)
                      for k in runs[0][phase] if k != "ops"}
    return out


async def main(args: argparse.Namespace) -> None:
    endpoint = os.environ.get("OSTINATO_S3_ENDPOINT", "http://127.0.0.1:18333")
    bucket = os.environ.get("OSTINATO_S3_BUCKET", "ostinato")
    key_id = os.environ.get("OSTINATO_S3_ACCESS_KEY", "ostinato")
    secret = os.environ.get("OSTINATO_S3_SECRET_KEY", "ostinato-local-secret")
    prefix = f"bench/{uuid.uuid4().hex[:12]}"
    names = ["obstore", "aiobotocore"]
    clients = [c for n in names if (c := await make(n, endpoint, bucket, key_id, secret))]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for rep in range(args.repeat):
            for size_name in SIZES:
                count = max(20, OPS[size_name] // (4 if args.quick else 1))
                # candidates alternate inside each size, so drift of the machine hits both
                for client in (clients if rep % 2 == 0 else clients[::-1]):
                    log(SCENARIO, f"run {rep + 1}/{args.repeat}: {client.name} {size_name} "
                                  f"x{count}")
                    runs.setdefault((client.name, size_name), []).append(
                        await measure(client, prefix, size_name, count, args.concurrency))
    finally:
        for client in clients:
            await client.close()
    results = {f"{n}/{s}": median_figures(r) for (n, s), r in runs.items()}
    weight = {}
    for c in clients:
        try:
            weight[c.name] = installed_size(c.name)
        except md.PackageNotFoundError:
            weight[c.name] = None
    conc = args.concurrency
    rows: list[tuple[str, Any, str]] = []
    for key, fig in results.items():
        for op in ("put", "get"):
            one, many = fig[f"{op}_1"], fig[f"{op}_{conc}"]
            rows.append((f"{key} {op}: p50 / p99 ms (1 at a time)",
                         f"{one['latency_ms_p50']} / {one['latency_ms_p99']}", ""))
            rows.append((f"{key} {op}: CPU us an op (1 / {conc} at a time)",
                         f"{one['cpu_us_per_op']:.0f} / {many['cpu_us_per_op']:.0f}", ""))
            rows.append((f"{key} {op}: ops/s (1 / {conc} at a time)",
                         f"{one['ops_per_s']:.0f} / {many['ops_per_s']:.0f}", ""))
    for name, w in weight.items():
        if w:
            rows.append((f"{name} {w['version']}: installed with its deps (MiB)",
                         w["installed_mib"], f"{len(w['distributions'])} distributions"))
    print(table(f"S3 client libraries on {endpoint} (medians of {args.repeat})", rows))
    path = write_result(SCENARIO, {
        "scenario": SCENARIO, "at": datetime.now(UTC).isoformat(), "endpoint": endpoint,
        "repeat": args.repeat, "concurrency": conc, "quick": args.quick,
        "cores": os.cpu_count(), "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
        "results": results, "weight": weight})
    log(SCENARIO, f"written {path}")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the requests")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (median taken)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="requests in flight in the throughput phase")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
