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
    backoff,
    group_notifications,
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
