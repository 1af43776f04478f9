"""The alert rules as pure functions (ostinato.alerts): firing and resolved transitions per key
with dedup, routing by owner with the tenant's default, the Alertmanager webhook body (version
4), grouping by (sink, group key), and the delivery backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato.alerts import (
    RULES,
    Current,
    Signal,
    Sink,
    Thresholds,
    backoff,
    cutoff,
    group_notifications,
    lag_breached,
    route,
    transitions,
    webhook_body,
)
from ostinato.alerts.payload import ZERO_TIME, alert_object

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def sig(rule: str = "OstinatoDeadLetter", job: str = "j1", tenant: str = "t1",
        owner: str | None = "billing", **extra: str) -> Signal:
    return Signal(rule, tenant, {"tenant": "acme", "job": job, "job_id": job, **extra}, owner)


def test_a_new_signal_fires_once_and_a_gone_one_resolves() -> None:
    s = sig()
    [t] = transitions([], [s], evaluated=set(RULES))
    assert (t.status, t.tenant_id, t.key, t.signal) == ("firing", "t1", s.key, s)
    firing = [Current("t1", s.key, s.rule)]
    assert transitions(firing, [s], evaluated=set(RULES)) == []  # dedup: firing already
    [r] = transitions(firing, [], evaluated=set(RULES))
    assert (r.status, r.key, r.signal) == ("resolved", s.key, None)


def test_a_rule_not_evaluated_resolves_nothing() -> None:
    s = sig()
    assert transitions([Current("t1", s.key, s.rule)], [], evaluated={"OstinatoRunStuck"}) == []


def test_keys_identify_rule_tenant_job_and_kind_but_not_annotations_or_owner() -> None:
    a = sig()
    assert a.key == Signal(a.rule, "t1", a.labels, "another-team", {"n": "3"}).key
    assert len({a.key, sig(job="j2").key, sig(tenant="t2").key,
                sig(rule="OstinatoRunStuck").key,
                sig(rule="OstinatoCompletionOverdue", kind="complete_within").key,
                sig(rule="OstinatoCompletionOverdue", kind="max_staleness").key}) == 6


def test_labels_and_annotations() -> None:
    s = sig(rule="OstinatoCompletionOverdue", kind="max_staleness")
    assert s.all_labels() == {"alertname": "OstinatoCompletionOverdue", "severity": "critical",
                              "tenant": "acme", "job": "j1", "job_id": "j1",
                              "kind": "max_staleness", "owner": "billing"}
    assert "max_staleness" in s.all_annotations()["summary"]
    assert s.group_key == '{}:{alertname="OstinatoCompletionOverdue",owner="billing",' \
                          'tenant="acme"}'
    assert "owner" not in sig(owner=None).all_labels()


@pytest.mark.parametrize(("owner", "expected"), [
    ("billing", ["billing-chat", "billing-pager"]),
    ("search", ["default"]),  # an owner without a sink: the default
    (None, ["default"]),
])
def test_routing_by_owner_with_the_tenants_default(owner: str | None,
                                                   expected: list[str]) -> None:
    sinks = [Sink("billing-pager", ("billing",), False), Sink("billing-chat", ("billing", "x"),
                                                              False),
             Sink("default", (), True)]
    assert route(owner, sinks) == expected


def test_routing_without_a_default_sink_goes_nowhere() -> None:
    assert route(None, [Sink("b", ("billing",), False)]) == []


def test_the_webhook_body_is_alertmanagers_version_4() -> None:
    labels = {"alertname": "OstinatoDeadLetter", "tenant": "acme", "job": "j1"}
    firing = alert_object("firing", labels, {"summary": "s"}, T0, None)
    assert firing["endsAt"] == ZERO_TIME and firing["startsAt"] == "2026-03-02T09:00:00Z"
    resolved = alert_object("resolved", {**labels, "job": "j2"}, {"summary": "s"}, T0,
                            T0 + timedelta(minutes=5))
    assert resolved["endsAt"] == "2026-03-02T09:05:00Z"
    assert firing["fingerprint"] != resolved["fingerprint"]
    body = webhook_body("pager", "{}:{a}", [firing, resolved])
    assert body["version"] == "4" and body["groupKey"] == "{}:{a}"
    assert body["status"] == "firing" and body["receiver"] == "pager"
    assert body["commonLabels"] == {"alertname": "OstinatoDeadLetter", "tenant": "acme"}
    assert body["groupLabels"] == {"alertname": "OstinatoDeadLetter", "tenant": "acme"}
    assert body["commonAnnotations"] == {"summary": "s"}
    assert body["alerts"] == [firing, resolved]
    assert webhook_body("pager", "k", [resolved])["status"] == "resolved"


def test_grouping_by_sink_and_group_key_keeps_order() -> None:
    groups = group_notifications([("a", "g1", 1), ("b", "g1", 2), ("a", "g1", 3),
                                  ("a", "g2", 4)])
    assert groups == {("a", "g1"): [1, 3], ("b", "g1"): [2], ("a", "g2"): [4]}


def test_backoff_doubles_to_a_cap() -> None:
    assert [backoff(n).total_seconds() for n in (1, 2, 3, 4, 9, 10, 50)] == \
        [1, 2, 4, 8, 256, 300, 300]


async def test_the_reconciler_runs_the_deadline_check_evaluation_and_delivery_as_duties() -> None:
    from ostinato.clock import SystemClock
    from services.reconciler.loop import ReconcileConfig, duties

    made = duties(None, None, SystemClock(), ReconcileConfig())  # type: ignore[arg-type]
    names = {d.name: d for d in made}
    assert {"reconcile_deadlines", "reconcile_alerts", "reconcile_alert_delivery"} <= set(names)
    delivery = names["reconcile_alert_delivery"]
    assert delivery.turn is None and delivery.interval == 1.0  # outside the checks' turns
    assert names["reconcile_alerts"].turn is names["reconcile_deadlines"].turn is not None
    assert delivery.on_stop is not None
    await delivery.on_stop()  # closes its HTTP client


def test_the_start_lag_histogram_is_kept_for_the_lag_rule_by_a_batched_duty() -> None:
    """Its retention takes turns with the checks and goes again at once while a pass deleted a
    full batch (after a rebuild, every minute of the log is back)."""
    from ostinato.clock import SystemClock
    from services.reconciler.checks.retention import START_LAG_BATCH
    from services.reconciler.loop import ReconcileConfig, duties

    names = {d.name: d for d in duties(None, None, SystemClock(),  # type: ignore[arg-type]
                                       ReconcileConfig())}
    retention = names["reconcile_start_lag_retention"]
    assert retention.batch == START_LAG_BATCH
    assert retention.turn is names["reconcile_alerts"].turn is not None
    assert retention.interval == ReconcileConfig().interval.total_seconds()


def pool_sig(rule: str, pool: str = "default", tenant: str = "t1") -> Signal:
    return Signal(rule, tenant, {"tenant": "acme", "tenant_id": tenant, "pool": pool})


def test_pool_rules_are_keyed_by_tenant_rule_and_pool_and_name_the_pool() -> None:
    keys = {pool_sig("OstinatoNoWorkerForPool").key, pool_sig("OstinatoNoWorkerForPool",
                                                             pool="etl").key,
            pool_sig("OstinatoNoWorkerForPool", tenant="t2").key,
            pool_sig("OstinatoLagSLOBreach").key}
    assert len(keys) == 4
    s = pool_sig("OstinatoNoWorkerForPool", pool="etl")
    assert "pool etl" in s.all_annotations()["summary"]
    assert s.all_labels() == {"alertname": "OstinatoNoWorkerForPool", "severity": "critical",
                              "tenant": "acme", "tenant_id": "t1", "pool": "etl"}
    assert 'owner=""' in s.group_key  # no job, no owner: the tenant's default sinks


def test_the_new_rules_exist_with_their_severities() -> None:
    assert {n: RULES[n].severity for n in (
        "OstinatoLeaseStuck", "OstinatoLagSLOBreach", "OstinatoOutboxBacklog",
        "OstinatoNoWorkerForPool", "OstinatoLedgerDisagreement")} == {
        "OstinatoLeaseStuck": "critical", "OstinatoLagSLOBreach": "warning",
        "OstinatoOutboxBacklog": "critical", "OstinatoNoWorkerForPool": "critical",
        "OstinatoLedgerDisagreement": "warning"}
    for rule in RULES.values():  # every summary formats with a job's or a pool's labels
        Signal(rule.name, "t", {"tenant": "a", "job": "j", "job_id": "j"}).all_annotations()
        Signal(rule.name, "t", {"tenant": "a", "pool": "p"}).all_annotations()


@pytest.mark.parametrize(("p99", "samples", "breached"), [
    (61.0, 10, True),
    (60.0, 10, False),  # at the SLO is within it
    (61.0, 9, False),  # too few starts to judge
    (None, 10, False),
    (3600.0, 100, True),
])
def test_a_lag_slo_breach_needs_enough_starts_and_a_p99_over_the_slo(
        p99: float | None, samples: int, breached: bool) -> None:
    t = Thresholds(lag_slo=timedelta(seconds=60), lag_min_samples=10)
    assert lag_breached(p99, samples, t) is breached


def test_a_cutoff_is_the_instant_a_condition_started_counting() -> None:
    assert cutoff(T0, timedelta(minutes=5)) == T0 - timedelta(minutes=5)
    d = Thresholds()
    assert (d.lease_stuck_after, d.lag_slo, d.outbox_after, d.no_worker_after) == (
        timedelta(seconds=60), timedelta(seconds=60), timedelta(seconds=120),
        timedelta(minutes=5))


def test_pool_usage_sums_slots_by_scope_and_counts_busy_ones() -> None:
    import uuid

    from ostinato.leases.attempts import BusySlots
    from ostinato.workers import PoolCapacity
    from services.reconciler.checks.pipeline import PoolUsage, pool_usage

    t = uuid.uuid4()
    usage = pool_usage([PoolCapacity(None, "default", 8), PoolCapacity(t, "default", 2),
                        PoolCapacity(t, "etl", 4)],
                       [BusySlots("default", 5), BusySlots("gone", 1)])
    assert usage == {"default": PoolUsage(8, 2, 5), "etl": PoolUsage(0, 4, 0),
                     "gone": PoolUsage(0, 0, 1)}
    assert usage["default"].utilisation == 0.5
    assert usage["gone"].utilisation == 0.0  # no slot: 0, not a division by zero


def test_consumer_lag_per_logical_topic() -> None:
    from ostinato.bus.consumer import lag_by_topic

    assert lag_by_topic([("t1.ostinato.runs.due", 10, 4), ("t1.ostinato.runs.due", 7, 7),
                         ("t1.ostinato.runs.finished", None, 3),
                         ("t1.ostinato.runs.ready.etl", 5, 9)]) == {
        "ostinato.runs.due": 6, "ostinato.runs.finished": 0, "ostinato.runs.ready.etl": 0}
