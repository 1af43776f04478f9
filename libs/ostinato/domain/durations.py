"""Durations in schedules, retry policies and timeouts: whole seconds, written compactly ("1h30m")
or in ISO 8601 ("PT1H30M").

Only fixed-length units are accepted (weeks, days, hours, minutes, seconds): a month or a year has
no fixed length, so "every P1M" would be a calendar rule, which is what `cron` is for.
"""

from __future__ import annotations

import re
from datetime import timedelta
from functools import lru_cache

MAX_DURATION = timedelta(days=3660)

_COMPACT = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_ISO = re.compile(r"^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")
_UNIT_SECONDS = (7 * 86400, 86400, 3600, 60, 1)


@lru_cache(maxsize=4096)  # a few distinct texts, read again for every job the scheduler fires
def parse_duration(text: str) -> timedelta:
    """Parse "90s", "15m", "1h30m", "2d", "1w" or ISO 8601 "PT15M"/"P1DT2H"; ValueError says why."""
    raw = text.strip()
    if not raw:
        raise ValueError("empty duration; write e.g. \"90s\", \"15m\", \"1h30m\" or \"PT15M\"")
    upper = raw.upper()
    match = _ISO.match(upper) if upper.startswith("P") else _COMPACT.match(raw.lower())
    if match is None or not any(match.groups()) or upper in ("P", "PT") or upper.endswith("T"):
        if upper.startswith("P") and re.search(r"\d+(\.\d+)?Y|P[^T]*\d+M", upper):
            raise ValueError(f"{text!r}: years and months have no fixed length; use days or cron")
        if "." in raw or "," in raw:
            raise ValueError(f"{text!r}: durations are whole seconds (no fractions)")
        raise ValueError(
            f"{text!r} is not a duration; write e.g. \"90s\", \"15m\", \"1h30m\", \"2d\" or "
            "ISO 8601 \"PT15M\""
        )
    seconds = sum(int(g) * unit for g, unit in zip(match.groups(), _UNIT_SECONDS, strict=True)
                  if g is not None)
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is longer than the maximum of {MAX_DURATION.days} days")
    return timedelta(seconds=seconds)


@lru_cache(maxsize=4096)  # written again for every job submitted
def format_duration(value: timedelta) -> str:
    """The canonical compact form ("1d2h3m4s", "0s"), parsed back to the same value."""
    total = int(value.total_seconds())
    if timedelta(seconds=total) != value or total < 0:
        raise ValueError(f"{value!r} is not a non-negative whole number of seconds")
    if total == 0:
        return "0s"
    parts = []
    for unit, suffix in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        amount, total = divmod(total, unit)
        if amount:
            parts.append(f"{amount}{suffix}")
    return "".join(parts)
