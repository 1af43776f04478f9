"""Alerts that reach people: pure rules over values (docs/ALERTS.md). `rules` names the rules
and builds a signal's labels; `state` decides firing and resolved transitions per alert key
(deduplicated: a firing alert fires once per episode); `routing` picks a tenant's sinks by the
job's owner, with the tenant's default sinks for the rest; `payload` builds the Alertmanager
webhook body (version 4) and groups a sink's notifications by group key; `backoff` spaces the
retries of a sink that is down; `conditions` holds the thresholds of the fleet-state rules
(stuck lease, lag SLO, outbox backlog, no worker, ledger disagreement). The reconciler reads
the signals, keeps the state and the delivery outbox in PostgreSQL and delivers
(services/reconciler/checks/alerts.py)."""

from ostinato.alerts.conditions import Thresholds, cutoff, lag_breached
from ostinato.alerts.payload import backoff, group_notifications, webhook_body
from ostinato.alerts.routing import Sink, route
from ostinato.alerts.rules import RULES, Rule, Signal
from ostinato.alerts.state import Current, Transition, transitions

__all__ = ["RULES", "Current", "Rule", "Signal", "Sink", "Thresholds", "Transition", "backoff",
           "cutoff", "group_notifications", "lag_breached", "route", "transitions",
           "webhook_body"]
