"""`infra/k8s` describes the suite `make up` runs (infra/k8s/README.md), and nothing runs those
manifests on the project's machines: so the security that matters is checked here, by parsing
them. The broker has the local broker's listeners, SASL and authorizer
(`infra/kafka/server.properties`); the migrate Job creates both database roles and the services'
Kafka users; every service connects as its own Kafka user with its password from the Secret.
Every manifest is valid against the Kubernetes schemas `kubernetes-validate` bundles (offline),
and every service is highly available: two or more replicas, a PodDisruptionBudget, spread over
nodes, probes and a grace period that cover the drain (issue 39). (PyYAML comes with litestar.)"""

from __future__ import annotations

import inspect
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ostinato.bus import access
from ostinato.bus.topics import Topics
from ostinato.runtime.ops import DRAIN_GRACE_SECONDS, HttpServer
from ostinato.runtime.service import STOP_SECONDS
from ostinato.telemetry import tracing
from tests.helpers.lab.cluster import ROOT

K8S = ROOT / "infra" / "k8s"
SERVICE_FILES = {"api": "api", "scheduler": "scheduler", "dispatcher": "dispatcher",
                 "worker_gateway": "worker-gateway", "reconciler": "reconciler"}


def properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def of_kind(name: str, kind: str) -> dict[str, Any]:
    [doc] = [d for d in documents(name) if d["kind"] == kind]
    return doc


def listeners(value: str) -> dict[str, str]:
    """`NAME://host:port,...` -> {NAME: host}."""
    return {name: address.rpartition(":")[0]
            for name, _, address in (item.partition("://") for item in value.split(","))}


def container(name: str, kind: str = "Deployment") -> dict[str, Any]:
    return of_kind(name, kind)["spec"]["template"]["spec"]["containers"][0]


def secret_env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in c.get("env", [])
            if "valueFrom" in e}


def plain_env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


LOCAL = properties((ROOT / "infra" / "kafka" / "server.properties").read_text())
K8S_BROKER = properties(of_kind("kafka.yaml", "ConfigMap")["data"]["server.properties"])


def test_the_k8s_broker_has_the_local_brokers_listeners_and_sasl() -> None:
    assert listeners(K8S_BROKER["listeners"]).keys() == listeners(LOCAL["listeners"]).keys() \
        == {"PLAINTEXT", "CONTROLLER", "TENANTS", "SERVICES"}
    for key in ("listener.security.protocol.map", "controller.listener.names",
                "inter.broker.listener.name", "sasl.enabled.mechanisms",
                "listener.name.tenants.sasl.enabled.mechanisms",
                "listener.name.tenants.scram-sha-256.sasl.jaas.config",
                "listener.name.services.sasl.enabled.mechanisms",
                "listener.name.services.scram-sha-256.sasl.jaas.config"):
        assert K8S_BROKER[key] == LOCAL[key], key
    protocols = dict(p.split(":") for p in K8S_BROKER["listener.security.protocol.map"].split(","))
    assert protocols["TENANTS"] == protocols["SERVICES"] == "SASL_PLAINTEXT"
    # The unauthenticated listeners stay inside the broker's pod (on loopback locally).
    k8s, local = listeners(K8S_BROKER["listeners"]), listeners(LOCAL["listeners"])
    assert k8s["PLAINTEXT"] == k8s["CONTROLLER"] == "localhost"
    assert local["PLAINTEXT"] == local["CONTROLLER"] == "127.0.0.1"
    exposed = {p["port"] for p in of_kind("kafka.yaml", "Service")["spec"]["ports"]}
    assert exposed == {9094, 9095}


def test_the_k8s_broker_has_the_local_authorizer_and_super_users() -> None:
    for key in ("authorizer.class.name", "allow.everyone.if.no.acl.found"):
        assert K8S_BROKER[key] == LOCAL[key], key
    assert LOCAL["authorizer.class.name"].endswith("StandardAuthorizer")
    assert LOCAL["allow.everyone.if.no.acl.found"] == "false"
    supers = set(K8S_BROKER["super.users"].split(";"))
    # the inter-broker and controller listeners' User:ANONYMOUS, and the migrate Job's admin
    assert supers == set(LOCAL["super.users"].split(";")) | {"User:ostinato-admin"}
    command = " ".join(container("kafka.yaml", "StatefulSet")["command"])
    assert "--add-scram" in command and "name=ostinato-admin" in command
    assert secret_env(container("kafka.yaml", "StatefulSet")) == {
        "KAFKA_ADMIN_PASSWORD": "kafka-admin-password"}


def test_every_service_connects_as_its_own_kafka_user_with_a_password_from_the_secret() -> None:
    config = of_kind("config.yaml", "ConfigMap")["data"]
    assert config["OSTINATO_KAFKA_BOOTSTRAP"].endswith(":9095")  # SERVICES
    assert config["OSTINATO_KAFKA_TENANT_BOOTSTRAP"].endswith(":9094")  # TENANTS
    assert set(SERVICE_FILES) == set(access.SERVICES)
    for service, file in SERVICE_FILES.items():
        c = container(f"{file}.yaml")
        assert plain_env(c)["OSTINATO_KAFKA_USERNAME"] == f"ostinato-{file}" \
            == access.service_user(Topics(), service)
        assert secret_env(c)["OSTINATO_KAFKA_PASSWORD"] == f"kafka-{file}-password"


def test_the_migrate_job_creates_both_database_roles_and_the_kafka_users() -> None:
    roles_sql = of_kind("migrate.yaml", "ConfigMap")["data"]["roles.sql"]
    for role in ("ostinato_owner", "ostinato_app"):
        assert f"'CREATE ROLE {role} LOGIN'" in roles_sql
        assert f"ALTER ROLE {role} LOGIN NOSUPERUSER" in roles_sql
    assert "ALTER DATABASE ostinato OWNER TO ostinato_owner" in roles_sql
    job = of_kind("migrate.yaml", "Job")["spec"]["template"]["spec"]
    assert "-f /roles/roles.sql" in " ".join(job["initContainers"][0]["command"])
    migrate = job["containers"][0]
    command = " ".join(migrate["command"])
    assert command.index("ostinato migrate") < command.index("ostinato topics") \
        < command.index("ostinato kafka-users")
    assert plain_env(migrate)["OSTINATO_KAFKA_USERNAME"] == "ostinato-admin"
    secrets = secret_env(migrate)
    assert secrets["OSTINATO_KAFKA_PASSWORD"] == "kafka-admin-password"
    for service, file in SERVICE_FILES.items():
        assert secrets[f"KAFKA_{service.upper()}_PASSWORD"] == f"kafka-{file}-password"
    assert "postgres-password" not in secrets.values()  # only the init container has it


# The oldest Kubernetes release the manifests promise to fit (policy/v1 PDBs since 1.21; the
# bundled schemas start at 1.25). Strict: a misspelt or misplaced field is an error.
K8S_VERSION = "1.30"
# Kinds outside the core schemas: kustomize's own file and KEDA's example (not applied by -k).
NOT_CORE = {("kustomization.yaml", "Kustomization"), ("keda-workers.yaml", "ScaledObject")}


def manifests() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, doc) for path in sorted(K8S.rglob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize(("file", "doc"), manifests(),
                         ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_valid_against_the_kubernetes_schemas(file: str,
                                                                doc: dict[str, Any]) -> None:
    if (file, doc["kind"]) in NOT_CORE:
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        return
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_schema_check_refuses_a_broken_deployment() -> None:
    """The check above would catch a real mistake: a misspelt field, a string count."""
    deployment = of_kind("api.yaml", "Deployment")
    for broken in ({**deployment, "spec": {**deployment["spec"], "replica": 2}},
                   {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def drain_seconds() -> float:
    """What a service's stop takes at most: the drain (OSTINATO_DRAIN_SECONDS from the
    ConfigMap, then up to DRAIN_GRACE_SECONDS for requests in flight), uvicorn's graceful
    timeout, the duties' last ticks, then the tracing exporter's flush."""
    config = of_kind("config.yaml", "ConfigMap")["data"]
    drain = float(config["OSTINATO_DRAIN_SECONDS"]) + DRAIN_GRACE_SECONDS
    graceful = inspect.signature(HttpServer).parameters["graceful_timeout"].default
    return drain + graceful + STOP_SECONDS + tracing.SHUTDOWN_SECONDS


def test_every_deployment_is_one_of_the_services_or_jaeger() -> None:
    """A new service's Deployment must be added to SERVICE_FILES, and so to the HA checks."""
    deployments = {doc["metadata"]["name"] for _, doc in manifests()
                   if doc["kind"] == "Deployment"}
    assert deployments == set(SERVICE_FILES.values()) | {"jaeger"}


@pytest.mark.parametrize("file", sorted(SERVICE_FILES.values()))
def test_every_service_runs_two_or_more_instances_spread_over_nodes(file: str) -> None:
    deployment = of_kind(f"{file}.yaml", "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] >= 2
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0  # a rolling restart never takes one below its count
    [term] = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == labels


def test_no_service_pins_a_client_to_one_pod() -> None:
    """No session affinity: the web UI's sessions are in PostgreSQL (migration 0049), so any api
    pod serves a browser; pinning one would put every user behind one NAT on one pod."""
    services = [doc for _, doc in manifests() if doc["kind"] == "Service"]
    assert any(doc["metadata"]["name"] == "api" for doc in services)
    assert [doc["metadata"]["name"] for doc in services
            if doc["spec"].get("sessionAffinity", "None") != "None"] == []


@pytest.mark.parametrize("file", sorted(SERVICE_FILES.values()))
def test_every_service_has_a_disruption_budget_selecting_its_pods(file: str) -> None:
    deployment = of_kind(f"{file}.yaml", "Deployment")
    [pdb] = [doc for _, doc in manifests() if doc["kind"] == "PodDisruptionBudget"
             and doc["spec"]["selector"] == deployment["spec"]["selector"]]
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]  # a drain can proceed
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize("file", sorted(SERVICE_FILES.values()))
def test_every_services_probes_and_grace_period_cover_the_drain(file: str) -> None:
    pod = of_kind(f"{file}.yaml", "Deployment")["spec"]["template"]["spec"]
    c = container(f"{file}.yaml")
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"  # never restarted for a dependency
    assert c["startupProbe"]["httpGet"]["path"] == "/livez"
    port = c["ports"][0]["name"]
    assert {c[p]["httpGet"]["port"] for p in ("readinessProbe", "livenessProbe")} == {port}
    command = c["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    pre_stop = float(command[1])
    # The grace period counts from the preStop hook's start: the hook, then the whole drain.
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + drain_seconds()

