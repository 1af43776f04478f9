"""Every metric the shipped Prometheus alerting rules (infra/prometheus/) and Grafana dashboard
(infra/grafana/) name exists in ostinato.telemetry.metrics, with the labels they use: a renamed
metric or label breaks this test, not an operator's pager."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from ostinato.telemetry import metrics  # (importing it registers the metrics)

ROOT = Path(__file__).resolve().parents[2] / "infra"
NAME = re.compile(r"\bostinato_[a-z_]+\b")
SUFFIXES = ("_bucket", "_count", "_sum")
LABELS = re.compile(r"by \(([^)]*)\)")


def known() -> dict[str, set[str]]:
    """Metric family name → its label names (histogram series names included)."""
    out: dict[str, set[str]] = {}
    for collector in list(REGISTRY._collector_to_names):
        for family in collector.describe() if hasattr(collector, "describe") else []:
            labels = set(getattr(collector, "_labelnames", ()))
            out[family.name] = labels
            if family.type == "counter":  # the family drops the `_total` its sample has
                out[family.name + "_total"] = labels
            for s in SUFFIXES:
                out[family.name + s] = labels | ({"le"} if s == "_bucket" else set())
    return out


def rule_expressions(text: str) -> list[tuple[str, str]]:
    """(alert, expr) of a rule file: `expr:` on one line, or a `|` block under it (no YAML
    library is a dependency of the project)."""
    found: list[tuple[str, str]] = []
    alert, lines = "", text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("- alert:"):
            alert = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("expr:"):
            value = stripped.split(":", 1)[1].strip()
            if value == "|":
                indent = len(line) - len(line.lstrip())
                block = []
                for more in lines[i + 1:]:
                    if more.strip() and len(more) - len(more.lstrip()) <= indent:
                        break
                    block.append(more.strip())
                value = " ".join(block)
            found.append((f"prometheus:{alert}", value))
    return found


def expressions() -> list[tuple[str, str]]:
    found = rule_expressions((ROOT / "prometheus" / "ostinato-alerts.yaml").read_text())
    assert len(found) == (ROOT / "prometheus" / "ostinato-alerts.yaml").read_text().count(
        "- alert:")
    dashboard = json.loads((ROOT / "grafana" / "ostinato-health.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found.append((f"grafana:{panel['title']}", target["expr"]))
    return found


def test_the_files_name_metrics_at_all() -> None:
    assert len(expressions()) > 20
    assert all(NAME.search(expr) for _, expr in expressions())


@pytest.mark.parametrize(("where", "expr"), expressions(), ids=lambda x: str(x)[:60])
def test_every_metric_and_label_named_exists(where: str, expr: str) -> None:
    families = known()
    names = set(NAME.findall(expr))
    assert names <= set(families), (where, names - set(families))
    labels_of_expr = set().union(*(families[n] for n in names))
    for group in LABELS.findall(expr):
        used = {label.strip() for label in group.split(",") if label.strip()}
        assert used <= labels_of_expr | {"le"}, (where, used - labels_of_expr)


SOURCES = Path(__file__).resolve().parents[2]
# `metrics.X.set(`, or `metrics.X.labels(...).inc(` with calls inside the label values, or the
# bound setter taken once for many values (`observe = metrics.X.labels(...).observe`)
SETTER = re.compile(r"\bmetrics\.([A-Z_]+)\.(?:labels\((?:(?!metrics\.[A-Z]).){0,400}?\)\s*\.)?"
                    r"(?:set|inc|observe|time)(?:\(|\s*$)", re.S | re.M)


def set_somewhere() -> set[str]:
    """Metric constants some service or library sets, increments or observes (outside the
    metrics module, whose zero series do not count)."""
    found: set[str] = set()
    for root in ("services", "libs"):
        for path in (SOURCES / root).rglob("*.py"):
            if path.name != "metrics.py":
                found.update(SETTER.findall(path.read_text()))
    return found


def constant_of(family: str) -> str | None:
    for name, value in vars(metrics).items():
        if getattr(value, "_name", None) in (family, family.removesuffix("_total")):
            return name
    return None


@pytest.mark.parametrize(("where", "expr"), expressions(), ids=lambda x: str(x)[:60])
def test_every_metric_named_is_exported_with_a_value_by_some_service(where: str,
                                                                     expr: str) -> None:
    """Defined is not enough (ostinato_pool_slots was defined and never set, so a shipped rule
    fired on every cluster): some code outside the metrics module must set each one. The
    capacity metrics' values are asserted against the real servers in
    tests/integration/test_capacity_metrics.py."""
    setters = set_somewhere()
    for name in set(NAME.findall(expr)):
        family = next((name.removesuffix(s) for s in SUFFIXES if name.endswith(s)), name)
        constant = constant_of(family)
        assert constant is not None, (where, name)
        assert constant in setters, (where, name, constant)


def test_the_setter_search_finds_the_capacity_metrics() -> None:
    assert {"POOL_SLOTS", "POOL_BUSY_SLOTS", "POOL_UTILISATION", "CONSUMER_LAG"} <= set_somewhere()
