"""Kafka access for tenants: SCRAM users and ACLs, so a tenant's producer can write its own
submit topic and nothing else (docs/KAFKA.md).

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

SCRAM_SHA_256 = 1  # Kafka's ScramMechanism id
SCRAM_ITERATIONS = 8192
TOPIC, LITERAL = 2, 3  # ResourceType.TOPIC, PatternType.LITERAL
WRITE, DESCRIBE = 4, 8  # AclOperation
ALLOW = 3  # AclPermissionType
ANY_HOST = "*"


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

    def __init__(self, principal: str, topic: str, operations: tuple[int, ...]) -> None:
        self._creations = [(TOPIC, topic, LITERAL, principal, ANY_HOST, op, ALLOW, {})
                           for op in operations]

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


async def grant_tenant(bootstrap: str, *, tenant_id: object, topic: str,
                       password: str) -> None:
    """Set the tenant's SCRAM password (creating the user, or rotating it) and allow it to
    write and describe its submit topic, nothing else. Idempotent: ACLs already there stay."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="ostinato-access")
    await admin.start()
    try:
        user = tenant_user(tenant_id)
        scram = await admin._send_request(_AlterScram(user, password))
        for _user, code, message, _tags in scram.results:
            if code:
                raise KafkaAccessError(f"SCRAM credentials for {user}: {message} ({code})")
        acls = await admin._send_request(_CreateAcls(f"User:{user}", topic, (WRITE, DESCRIBE)))
        for code, message, _tags in acls.results:
            if code:
                raise KafkaAccessError(f"ACLs for {user} on {topic}: {message} ({code})")
    finally:
        await admin.close()


def new_password() -> str:
    return secrets.token_urlsafe(32)
