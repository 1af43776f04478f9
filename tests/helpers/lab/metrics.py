"""Reading a service's Prometheus `/metrics` in a test: the samples, and a sum over labels."""

from __future__ import annotations

from collections.abc import Iterable

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["metric_total", "scrape"]


async def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a service's /metrics: (name, labels, value)."""
    async with httpx.AsyncClient(timeout=3) as client:
        r = await client.get(f"http://127.0.0.1:{port}/metrics")
    r.raise_for_status()
    return [(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(r.text) for s in family.samples]


def metric_total(samples: Iterable[tuple[str, dict[str, str], float]], name: str,
                 **labels: str) -> float:
    """Sum of a metric's samples whose labels include `labels`."""
    return sum(v for n, lbl, v in samples
               if n == name and all(lbl.get(k) == x for k, x in labels.items()))
