"""Start the five services as separate OS processes against the real servers, each run (a test,
a benchmark) on its own database, topic prefix and free ports, and stop them afterwards. With
`instances=2` (or more) every service runs that many times (`api`, `api-2`, ...) and the api and
the worker-gateway are reached through a `Balancer` in front of their instances, so clients and
workers use either (issue 39)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.helpers.lab.balancer import Balancer

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ("api", "scheduler", "dispatcher", "worker_gateway", "reconciler")
BALANCED = ("api", "worker_gateway")  # what clients and workers reach over HTTP


def instance_alias(service: str, n: int) -> str:
    """The n-th (1-based) instance's alias: `api`, `api-2`, ..."""
    return service if n == 1 else f"{service}-{n}"


def service_of(alias: str) -> str:
    """The service an instance alias runs (`scheduler-3` -> `scheduler`)."""
    return alias.rsplit("-", 1)[0] if alias.rsplit("-", 1)[-1].isdigit() else alias


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free now. Each socket stays bound until all are taken: released
    one by one, the kernel may hand the same port out twice, and two services given one port
    left the second unbound while the first answered its readiness probe (a suite's API URL
    then reached a worker gateway: 404 on /v1/tenants)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


@dataclass
class Cluster:
    database_url: str
    kafka_bootstrap: str
    topic_prefix: str
    log_dir: Path
    admin_key: str = field(default_factory=lambda: "adm_" + secrets.token_hex(16))
    ports: dict[str, int] = field(
        default_factory=lambda: dict(zip(SERVICES, free_ports(len(SERVICES)), strict=True)))
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    # per service, on top of extra_env (e.g. each service's own Kafka user)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # instances of each service started by `start()`; above 1, a balancer fronts the api and
    # the gateway and `api_url` / `gateway_url` name it
    instances: int = 1
    balancers: dict[str, Balancer] = field(default_factory=dict)
    front_ports: dict[str, int] = field(default_factory=dict)  # the balancers' own

    def __post_init__(self) -> None:
        extra = [instance_alias(s, n) for n in range(2, self.instances + 1) for s in SERVICES]
        if extra:  # drawn with the first ones' count, so none repeats a port already given
            taken = set(self.ports.values())
            fresh = [p for p in free_ports(len(extra) + len(BALANCED) + len(taken))
                     if p not in taken]
            self.ports.update(zip(extra, fresh, strict=False))
            self.front_ports = dict(zip(BALANCED, fresh[len(extra):], strict=False))

    def aliases(self, service: str) -> list[str]:
        """Every alias of `service`'s processes (started, or to be started by `start()`)."""
        return [a for a in dict.fromkeys([*self.ports, *self.procs]) if service_of(a) == service]

    @property
    def api_url(self) -> str:
        return self.balancers["api"].url if "api" in self.balancers \
            else f"http://127.0.0.1:{self.ports['api']}"

    @property
    def gateway_url(self) -> str:
        return self.balancers["worker_gateway"].url if "worker_gateway" in self.balancers \
            else f"http://127.0.0.1:{self.ports['worker_gateway']}"

    def env(self, service: str | None = None) -> dict[str, str]:
        return {
            **os.environ,
            "OSTINATO_DATABASE_URL": self.database_url,
            "OSTINATO_KAFKA_BOOTSTRAP": self.kafka_bootstrap,
            "OSTINATO_TOPIC_PREFIX": self.topic_prefix,
            "OSTINATO_TOPIC_PARTITIONS": "3",
            "OSTINATO_ADMIN_KEY": self.admin_key,
            "OSTINATO_API_PORT": str(self.ports["api"]),
            "OSTINATO_GATEWAY_PORT": str(self.ports["worker_gateway"]),
            "OSTINATO_SCHEDULER_PORT": str(self.ports["scheduler"]),
            "OSTINATO_DISPATCHER_PORT": str(self.ports["dispatcher"]),
            "OSTINATO_RECONCILER_PORT": str(self.ports["reconciler"]),
            "OSTINATO_RECONCILE_INTERVAL_SECONDS": "1",
            **self.extra_env,
            **self.service_env.get(service or "", {}),
        }

    def start(self, names: tuple[str, ...] = SERVICES, *, up_to: int | None = None) -> None:
        """Start `names`, `instances` of each (or only the first `up_to`: the others, whose
        ports the balancers already name, join later by `spawn`), the first ones first, and
        with several instances, the balancers."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for n in range(1, (up_to or self.instances) + 1):
            aliases = [instance_alias(name, n) for name in names]
            for alias, name in zip(aliases, names, strict=True):
                self._popen(alias, name)
            for alias in aliases:
                self.wait_ready(alias)
        if self.instances > 1:
            for service in BALANCED:
                if service in names and service not in self.balancers:
                    self.balancers[service] = Balancer(
                        self.front_ports[service],
                        [self.ports[a] for a in self.aliases(service)],
                        self.log_dir / f"balancer-{service}.log").start()

    def _popen(self, alias: str, service: str, env: dict[str, str] | None = None) -> None:
        port_var = {"api": "API", "worker_gateway": "GATEWAY"}.get(service, service.upper())
        env = {**self.env(service), f"OSTINATO_{port_var}_PORT": str(self.ports[alias]),
               **(env or {})}
        log = (self.log_dir / f"{alias}.log").open("ab")
        self.procs[alias] = subprocess.Popen(
            [sys.executable, "-m", f"services.{service}"], cwd=ROOT, env=env,
            stdout=log, stderr=subprocess.STDOUT,
        )

    def spawn(self, alias: str, service: str, env: dict[str, str] | None = None) -> None:
        """Start one more process of `service` (e.g. a second scheduler) under `alias`, with
        its own ops port (and `env` on top of the cluster's), and wait until it is ready. An
        alias given a port in advance (an instance a balancer already names) keeps it."""
        if alias not in self.ports or alias in self.procs:
            self.ports[alias] = free_port()
        self._popen(alias, service, env)
        self.wait_ready(alias)

    def kill(self, alias: str, sig: int = signal.SIGKILL) -> None:
        """Send a signal (default kill -9) to one process; SIGKILL also reaps it."""
        proc = self.procs[alias]
        proc.send_signal(sig)
        if sig == signal.SIGKILL:
            proc.wait(timeout=10)

    def wait_ready(self, name: str, seconds: float = 300) -> None:
        """Until its /readyz answers 200; a give-up deadline only (the api's imports and app
        alone take seconds of CPU, minutes on a machine loaded tenfold past its cores)."""
        deadline = time.monotonic() + seconds
        url = f"http://127.0.0.1:{self.ports[name]}/readyz"
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited: {self.tail(name)}")
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{name} not ready: {self.tail(name)}")

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() \
            else "(no log)"

    def stop(self) -> dict[str, int]:
        """SIGTERM every service (graceful stop), SIGKILL what does not exit; return exit codes.
        The balancers go last (a draining instance's answers still pass through them)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a stopped process cannot handle SIGTERM
                proc.send_signal(signal.SIGTERM)
        codes = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait()
        for balancer in self.balancers.values():
            balancer.stop()
        return codes
