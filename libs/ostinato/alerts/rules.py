"""The alert rules and the signals they fire on. A signal is a condition true now for one
subject (a tenant's job, or a tenant's job and a reason); its alert key — the rule and its
identifying labels — is what firing and resolution are tracked by, and its group key (tenant,
rule, owner) what a sink's notifications are grouped by, as Alertmanager groups them."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    name: str  # the alertname label
    severity: str  # critical | warning
    summary: str  # the annotation, formatted with the signal's labels


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("OstinatoDeadLetter", "critical",
         "job {job} has runs in the dead-letter queue awaiting triage"),
    Rule("OstinatoCompletionOverdue", "critical",
         "job {job} missed its completion deadline ({kind}) and has not succeeded since"),
    Rule("OstinatoOccurrenceOmitted", "critical",
         "job {job}: the independent ledger found an expected slot with neither a run nor a "
         "skip, and no later run succeeded"),
    Rule("OstinatoRunStuck", "warning",
         "job {job} has runs stuck (GET /v1/runs?job_id=...: suspended too long, waiting on a "
         "dead-lettered child, or pinned to a version no worker serves)"),
    Rule("OstinatoJobAutoPaused", "warning",
         "job {job} was paused after repeated failures and is not running"),
    Rule("OstinatoLeaseStuck", "critical",
         "job {job} has attempt leases that expired and were not taken over (no retry or dead "
         "letter decided: the reconciler's lease check is not keeping up)"),
    Rule("OstinatoLagSLOBreach", "warning",
         "schedule lag p99 of pool {pool} is over its SLO (runs start late)"),
    Rule("OstinatoOutboxBacklog", "critical",
         "messages of this tenant wait unpublished in the outbox (Kafka or the relays are "
         "behind): runs are not dispatched or woken on time"),
    Rule("OstinatoNoWorkerForPool", "critical",
         "runs wait in pool {pool} and no live worker serves it (the tenant's own or a shared "
         "one)"),
    Rule("OstinatoLedgerDisagreement", "warning",
         "job {job}: the scheduler's cron implementation and the independent ledger's disagree "
         "on a slot (GET /v1/jobs/.../ledger)"),
    Rule("OstinatoDatabaseFilling", "warning",
         "the database's storage passed its alert watermark (see used, alert_at, refuse_at): "
         "at the refuse watermark new work is refused until retention makes room"),
    Rule("OstinatoNewWorkRefused", "critical",
         "the database's storage passed its refuse watermark: new jobs, runs and workflow "
         "starts are refused (503 storage-full) until retention makes room; runs in flight "
         "finish"),
    Rule("OstinatoArchiveFailing", "warning",
         "archiving finished runs to object storage has failed for a while (see "
         "failing_since, last_error): retention is paused and the hot tables grow; nothing "
         "is removed that was not confirmed archived"),
)}
IDENTIFYING = ("alertname", "job_id", "kind", "reason", "pool")


@dataclasses.dataclass(frozen=True, slots=True)
class Signal:
    """One rule's condition, true now for one subject."""

    rule: str
    tenant_id: str
    labels: Mapping[str, str]  # tenant, job, job_id, and the rule's own (kind, reason)
    owner: str | None = None
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def all_labels(self) -> dict[str, str]:
        rule = RULES[self.rule]
        out = {"alertname": rule.name, "severity": rule.severity, **self.labels}
        if self.owner:
            out["owner"] = self.owner
        return out

    def all_annotations(self) -> dict[str, str]:
        labels = dict.fromkeys(("job", "kind", "reason", "pool"), "") | dict(self.labels)
        return {"summary": RULES[self.rule].summary.format(**labels), **self.annotations}

    @property
    def key(self) -> str:
        """Tenant, rule and identifying labels: stable across evaluations and processes."""
        labels = self.all_labels()
        ident = ",".join([self.tenant_id, *(f"{k}={labels[k]}" for k in IDENTIFYING
                                           if k in labels)])
        return hashlib.sha256(ident.encode()).hexdigest()[:32]

    @property
    def group_key(self) -> str:
        """Alertmanager's shape: `{}:{label="value",...}` over the grouping labels."""
        return ("{}:{" + f'alertname="{RULES[self.rule].name}",owner="{self.owner or ""}",'
                f'tenant="{self.labels.get("tenant", self.tenant_id)}"' + "}")
