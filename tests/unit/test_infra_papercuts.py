"""Two local set-up papercuts of issue 42, each against real processes:

- the demo worker talks to the gateway on OSTINATO_GATEWAY_PORT (infra/services.sh starts it
  with that URL), not to 8081 whatever the port says;
- infra/redis/down.sh stops only the Redis of its own clone, found by its pid file and data
  folder (Redis works in its --dir), never another clone's that merely has the same port on its
  command line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ostinato.demo import gateway_url
from tests.helpers.lab.cluster import ROOT, free_port


def test_the_demo_worker_gateway_follows_the_configured_port() -> None:
    assert gateway_url({"OSTINATO_GATEWAY_PORT": "9181"}) == "http://127.0.0.1:9181"
    assert gateway_url({}) == "http://127.0.0.1:8081"
    assert gateway_url({"OSTINATO_GATEWAY_URL": "http://gw:1", "OSTINATO_GATEWAY_PORT": "2"}) \
        == "http://gw:1"


@pytest.fixture
def fake_gateway() -> Iterator[tuple[int, list[str]]]:
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            paths.append(self.path)
            self.send_response(503)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], paths
    finally:
        server.shutdown()
        server.server_close()


def test_the_demo_worker_process_claims_from_the_configured_gateway_port(
        fake_gateway: tuple[int, list[str]]) -> None:
    port, paths = fake_gateway
    env = {k: v for k, v in os.environ.items() if k != "OSTINATO_GATEWAY_URL"}
    worker = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "python"), "-m", "ostinato.demo", "worker"], cwd=ROOT,
        env={**env, "OSTINATO_GATEWAY_PORT": str(port), "OSTINATO_DEMO_API_KEY": "k_test",
             "OSTINATO_OTLP_ENDPOINT": ""},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # a give-up, not a bound
        while not paths:
            assert worker.poll() is None, "the demo worker exited"
            assert time.monotonic() < deadline, "the demo worker never reached the gateway"
            time.sleep(0.1)
        assert paths[0].startswith("/v1/worker/")
    finally:
        worker.kill()
        worker.wait()


def clone(root: Path) -> Path:
    """A checkout's infra scripts for Redis under `root`, with its own .cache/redis."""
    for name in ("env.sh", "lib.sh", "redis/down.sh"):
        (root / "infra" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "infra" / name, root / "infra" / name)
    state = root / ".cache" / "redis"
    state.mkdir(parents=True)
    return state


def fake_redis(state: Path, port: int) -> int:
    """A process that looks like redis-server to /proc: its title as Redis sets it
    (`redis-server 127.0.0.1:<port>`), working in its data folder (Redis chdirs to --dir), and
    daemonized as Redis is (not this test's child, so nobody leaves it a zombie)."""
    out = subprocess.run(
        ["bash", "-c", f'(exec -a "redis-server 127.0.0.1:{port}" sleep 300) '
                       '</dev/null >/dev/null 2>&1 & echo $!'],
        cwd=state, capture_output=True, text=True, check=True).stdout
    pid = int(out)
    deadline = time.monotonic() + 10
    while "redis-server" not in Path(f"/proc/{pid}/cmdline").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return pid


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def down(root: Path, port: int) -> str:
    return subprocess.run([str(root / "infra" / "redis" / "down.sh")], capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "OSTINATO_REDIS_PORT": str(port)}).stdout


def test_redis_down_stops_its_own_clones_redis_only(tmp_path: Path) -> None:
    port = free_port()
    mine, theirs = clone(tmp_path / "a"), clone(tmp_path / "b")
    other = fake_redis(theirs, port)
    ours = None
    try:
        # No Redis of this clone: the other clone's, with the same port, is left alone, and
        # so is it when this clone's pid file is stale and now names the other's process.
        assert "not running" in down(tmp_path / "a", port)
        (mine / "redis.pid").write_text(f"{other}\n")
        assert "not running" in down(tmp_path / "a", port)
        assert alive(other)
        # This clone's own Redis is stopped (by its pid file, or found by its data folder).
        for pidfile in (True, False):
            ours = fake_redis(mine, port)
            if pidfile:
                (mine / "redis.pid").write_text(f"{ours}\n")
            assert f"stopping redis (pid {ours})" in down(tmp_path / "a", port)
            assert not alive(ours)
            assert alive(other)
    finally:
        for pid in (other, ours):
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_default_ports_lie_outside_the_ephemeral_range() -> None:
    """PostgreSQL's 55432 was inside Linux's ephemeral range (32768-60999): an outgoing
    connection could hold it and the server's start failed with "Address already in use"."""
    env = subprocess.run(
        ["bash", "-c", "env -i PATH=/usr/bin:/bin bash -c '. infra/env.sh && env'"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    values = dict(line.split("=", 1) for line in env.splitlines() if "=" in line)
    ports = [int(values[name]) for name in (
        "OSTINATO_PG_PORT", "OSTINATO_REDIS_PORT", "OSTINATO_KAFKA_CONTROLLER_PORT")]
    ports += [int(values[name].rpartition(":")[2].rstrip("/")) for name in (
        "OSTINATO_KAFKA_BOOTSTRAP", "OSTINATO_KAFKA_TENANT_BOOTSTRAP",
        "OSTINATO_KAFKA_SERVICE_BOOTSTRAP", "OSTINATO_JAEGER_OTLP", "OSTINATO_JAEGER_QUERY")]
    # the S3 server (infra/s3/common.sh): master, volume, filer on the three ports under the S3
    # port, and each one's gRPC port 10000 higher
    s3 = int(values["OSTINATO_S3_PORT"])
    ports += [p + grpc for p in range(s3 - 3, s3 + 1) for grpc in (0, 10_000)]
    assert [p for p in ports if 32768 <= p <= 60999] == []
