"""Kafka access: SCRAM users and ACLs, so a tenant's producer can write its own submit topic and
nothing else, and each service does only what it needs (docs/KAFKA.md).

aiokafka's admin client has no call for SCRAM credentials, and only the CreateAcls versions
Kafka 4 no longer accepts, so the two requests are declared here on aiokafka's protocol types
(the flexible versions Kafka 4 speaks) and sent through its admin connection, which talks to the
broker's internal PLAINTEXT listener as a super user.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from ostinato.bus.kafka import NO_AUTH, KafkaAuth
from ostinato.bus.topics import Topics

SCRAM_SHA_256 = 1  # Kafka's ScramMechanism id
SCRAM_ITERATIONS = 8192
TOPIC, GROUP, CLUSTER = 2, 3, 4  # ResourceType
LITERAL, PREFIXED = 3, 4  # PatternType
READ, WRITE, CREATE, ALTER, DESCRIBE = 3, 4, 5, 7, 8  # AclOperation
ALLOW = 3  # AclPermissionType
ANY_HOST = "*"
SERVICES = ("api", "scheduler", "dispatcher", "worker_gateway", "reconciler")


@dataclass(frozen=True)
class Acl:
    """One ALLOW rule: `operation` on the resource (a name, or every name with that prefix)."""

    resource: int
    name: str
    operation: int
    pattern: int = LITERAL


class KafkaAccessError(RuntimeError):
    """The broker refused an access change; the message is the broker's."""


class _AlterScramResponse(Response):
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("results", CompactArray(("user", CompactString("utf-8")), ("error_code", Int16),
                                 ("error_message", CompactString("utf-8")),
                                 ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _AlterScramRequest(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = _AlterScramResponse
    SCHEMA = Schema(
        ("deletions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8),
                                   ("tags", TaggedFields))),
        ("upsertions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8),
                                    ("iterations", Int32), ("salt", CompactBytes),
                                    ("salted_password", CompactBytes), ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _AlterScram(Request[_AlterScramRequest]):
    API_KEY = 51

    def __init__(self, user: str, password: str) -> None:
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, SCRAM_ITERATIONS)
        self._upsertion = (user, SCRAM_SHA_256, SCRAM_ITERATIONS, salt, salted, {})

    def build(self, request_struct_class: type[_AlterScramRequest]) -> _AlterScramRequest:
        return request_struct_class([], [self._upsertion], {})


class _CreateAclsResponse(Response):
    API_KEY = 30
    API_VERSION = 2
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("results", CompactArray(("error_code", Int16),
                                 ("error_message", CompactString("utf-8")),
                                 ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _CreateAclsRequest(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 30
    API_VERSION = 2
    RESPONSE_TYPE = _CreateAclsResponse
    SCHEMA = Schema(
        ("creations", CompactArray(
            ("resource_type", Int8), ("resource_name", CompactString("utf-8")),
            ("resource_pattern_type", Int8), ("principal", CompactString("utf-8")),
            ("host", CompactString("utf-8")), ("operation", Int8), ("permission_type", Int8),
            ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _CreateAcls(Request[_CreateAclsRequest]):
    API_KEY = 30

    def __init__(self, principal: str, acls: list[Acl]) -> None:
        self._creations = [(a.resource, a.name, a.pattern, principal, ANY_HOST, a.operation,
                            ALLOW, {}) for a in acls]

    def build(self, request_struct_class: type[_CreateAclsRequest]) -> _CreateAclsRequest:
        return request_struct_class(self._creations, {})


@dataclass(frozen=True)
class TenantAccess:
    """What a tenant's producer needs; the password exists only in this value and in the
    answer that shows it once (the broker keeps a salted SCRAM verifier)."""

    bootstrap: str
    username: str
    password: str
    topic: str
    mechanism: str = "SCRAM-SHA-256"
    security_protocol: str = "SASL_PLAINTEXT"


def tenant_user(tenant_id: object) -> str:
    return f"tenant-{tenant_id}"


def service_user(topics: Topics, service: str) -> str:
    """The service's SCRAM user; the topic prefix keeps test runs on one broker apart."""
    return f"{topics.prefix}ostinato-{service.replace('_', '-')}"


def tenant_acls(topic: str) -> list[Acl]:
    return [Acl(TOPIC, topic, WRITE), Acl(TOPIC, topic, DESCRIBE)]


def service_acls(topics: Topics, service: str) -> list[Acl]:
    """What each service needs, and no more. Every service's outbox relay (the api's too) may
    publish any logged event, so each writes every run topic, and creates a missing one at
    start (a pool added to OSTINATO_POOLS). Reading: the dispatcher its two wake-up topics in
    its group, the gateway the ready queues (no group), the api the tenants' submit topics in
    the ingest group. Managing tenants' users and ACLs (ALTER
    on the cluster) and their topics is the api's alone."""
    runs = f"{topics.prefix}ostinato.runs."
    acls = [Acl(TOPIC, runs, op, PREFIXED) for op in (WRITE, DESCRIBE, CREATE)]
    if service == "dispatcher":
        acls += [Acl(TOPIC, topics.due, READ), Acl(TOPIC, topics.finished, READ),
                 Acl(GROUP, f"{topics.prefix}ostinato-dispatcher", READ)]
    elif service == "worker_gateway":
        acls += [Acl(TOPIC, f"{runs}ready.", READ, PREFIXED)]
    elif service == "api":
        submit, rejects = f"{topics.prefix}ostinato.submit.", f"{topics.prefix}ostinato.rejects."
        acls += [Acl(TOPIC, submit, op, PREFIXED) for op in (READ, DESCRIBE, CREATE)]
        acls += [Acl(TOPIC, rejects, op, PREFIXED) for op in (WRITE, DESCRIBE, CREATE)]
        acls += [Acl(GROUP, f"{topics.prefix}ostinato.ingest", READ),
                 Acl(CLUSTER, "kafka-cluster", ALTER)]
    elif service not in SERVICES:
        raise ValueError(f"unknown service {service!r}")
    return acls


async def grant(bootstrap: str, *, user: str, password: str, acls: list[Acl],
                auth: KafkaAuth = NO_AUTH) -> None:
    """Set `user`'s SCRAM password (creating the user, or rotating it) and add its ACLs.
    Idempotent: ACLs already there stay as they are."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="ostinato-access",
                                **auth.options())
    await admin.start()
    try:
        scram = await admin._send_request(_AlterScram(user, password))
        for _user, code, message, _tags in scram.results:
            if code:
                raise KafkaAccessError(f"SCRAM credentials for {user}: {message} ({code})")
        created = await admin._send_request(_CreateAcls(f"User:{user}", acls))
        for code, message, _tags in created.results:
            if code:
                raise KafkaAccessError(f"ACLs for {user}: {message} ({code})")
    finally:
        await admin.close()


async def grant_tenant(bootstrap: str, *, tenant_id: object, topic: str, password: str,
                       auth: KafkaAuth = NO_AUTH) -> None:
    """The tenant's user may write and describe its submit topic, nothing else."""
    await grant(bootstrap, user=tenant_user(tenant_id), password=password,
                acls=tenant_acls(topic), auth=auth)


def new_password() -> str:
    return secrets.token_urlsafe(32)
