"""A tenant's Kafka producer access: its submit and rejects topics, its SCRAM user and the ACLs
that let it write its own submit topic and nothing else (docs/KAFKA.md). Given when the tenant
is created; `POST /v1/kafka/credentials` issues a new password (the old one stops working)."""

from __future__ import annotations

import uuid

from aiokafka.errors import KafkaError
from litestar import post

from ostinato.bus.access import KafkaAccessError, grant_tenant, new_password, tenant_user
from ostinato.bus.kafka import ensure_topics
from ostinato.domain import roles
from ostinato.domain.errors import Conflict, OstinatoError
from ostinato.runtime.settings import Settings
from ostinato.telemetry.logging import get_logger
from ostinato.wire.api import KafkaAccessView
from services.api.auditing import audited
from services.api.scope import Tenant

log = get_logger("ostinato.kafka_access")


class KafkaSubmissionOff(Conflict):
    code = "kafka-submission-off"
    title = "Kafka submission is off"


class KafkaUnavailable(OstinatoError):
    code = "kafka-unavailable"
    status = 503
    title = "Kafka unavailable"


async def grant(settings: Settings, tenant_id: uuid.UUID) -> KafkaAccessView:
    """Create the tenant's topics if missing and set a new password; idempotent otherwise."""
    if not settings.kafka_tenant_bootstrap:
        raise KafkaSubmissionOff("this deployment takes no jobs on Kafka "
                               "(OSTINATO_KAFKA_TENANT_BOOTSTRAP is not set)")
    topics = settings.topics
    submit, rejects = topics.submit(tenant_id), topics.rejects(tenant_id)
    password = new_password()
    try:
        auth = settings.kafka_auth
        replicas = settings.kafka_replication_factor
        await ensure_topics(settings.kafka_bootstrap, [submit], settings.kafka_submit_partitions,
                            auth, replicas)
        await ensure_topics(settings.kafka_bootstrap, [rejects], 1, auth, replicas)
        await grant_tenant(settings.kafka_bootstrap, tenant_id=tenant_id, topic=submit,
                           password=password, auth=auth)
    except (KafkaError, KafkaAccessError, OSError) as exc:
        log.warning("kafka access not granted", tenant_id=str(tenant_id), error=repr(exc))
        raise KafkaUnavailable(f"the broker did not grant access: {exc}") from exc
    return KafkaAccessView(
        bootstrap_servers=settings.kafka_tenant_bootstrap, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256", username=tenant_user(tenant_id), password=password,
        topic=submit, rejects_topic=rejects)


async def grant_at_creation(settings: Settings, tenant_id: uuid.UUID) -> KafkaAccessView | None:
    """A new tenant's access, or None (off here, or the broker down: the tenant exists anyway
    and its operator asks again with POST /v1/kafka/credentials)."""
    if not settings.kafka_tenant_bootstrap:
        return None
    try:
        return await grant(settings, tenant_id)
    except KafkaUnavailable:
        return None


@post("/v1/kafka/credentials", status_code=201, tags=["keys"],
      opt=audited("kafka.credentials", "tenant", action=roles.MANAGE_KEYS))
async def issue_kafka_credentials(tenant: Tenant) -> KafkaAccessView:
    """A new password for the tenant's Kafka producers (the previous one stops working), with
    the topic to write jobs to. 409 when the deployment takes no jobs on Kafka, 503 when the
    broker does not answer."""
    access = await grant(tenant.settings, tenant.tenant_id)
    tenant.audit.target_id = str(tenant.tenant_id)
    tenant.audit.after = {"username": access.username, "topic": access.topic}  # no password
    return access


ROUTES = [issue_kafka_credentials]
