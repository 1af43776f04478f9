"""The webhook body: Alertmanager's webhook format, version 4
(https://prometheus.io/docs/alerting/latest/configuration/#webhook_config), so a sink can be
Alertmanager itself (its /api/v2/alerts takes the `alerts`), or any chat bridge that reads
Alertmanager webhooks. One body per (sink, group key); a resolved alert carries its `endsAt`,
a firing one the zero time, as Alertmanager sends them."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

ZERO_TIME = "0001-01-01T00:00:00Z"


def rfc3339(at: datetime | None) -> str:
    if at is None:
        return ZERO_TIME
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def alert_object(status: str, labels: Mapping[str, str], annotations: Mapping[str, str],
                 starts_at: datetime, ends_at: datetime | None,
                 generator_url: str = "") -> dict[str, Any]:
    fingerprint = hashlib.sha256(
        ",".join(f"{k}={v}" for k, v in sorted(labels.items())).encode()).hexdigest()[:16]
    return {"status": status, "labels": dict(labels), "annotations": dict(annotations),
            "startsAt": rfc3339(starts_at),
            "endsAt": rfc3339(ends_at if status == "resolved" else None),
            "generatorURL": generator_url, "fingerprint": fingerprint}


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    first = dict(maps[0])
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in maps[1:])}


def webhook_body(receiver: str, group_key: str, alerts: Sequence[Mapping[str, Any]],
                 external_url: str = "") -> dict[str, Any]:
    """Alertmanager's webhook payload for one group of alert objects."""
    labels = [a["labels"] for a in alerts]
    common = _common(labels)
    group_labels = {k: common[k] for k in ("alertname", "owner", "tenant") if k in common}
    return {
        "version": "4", "groupKey": group_key, "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": receiver, "groupLabels": group_labels, "commonLabels": common,
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": external_url, "alerts": list(alerts),
    }


def group_notifications(items: Iterable[tuple[str, str, Any]]) -> dict[tuple[str, str], list]:
    """(sink, group key, item) → items by (sink, group key), in the order given."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for sink, group_key, item in items:
        groups[sink, group_key].append(item)
    return dict(groups)


def backoff(attempts: int, *, first: float = 1.0, cap: float = 300.0) -> timedelta:
    """The wait before the next try after `attempts` failed ones: 1 s doubling to 5 min."""
    return timedelta(seconds=min(cap, first * 2 ** max(0, attempts - 1)))
