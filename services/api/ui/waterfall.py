"""A run's waterfall (like Temporal's and Hatchet's timeline views): one lane per execution (a
claim, from its `RunStarted` to what ended it), per workflow step (its recorded duration, ending
when it was recorded; the executing one open to now) and per wait (a suspension, until it was
woken), each a bar placed on the run's span from its first event to its end (or now).

Pure: `spans` reads the run's events (and the step executing now), `layout` turns spans into
start offsets and widths as fractions of the run's span. The template draws each bar as an SVG
`<rect>` whose `x` and `width` attributes are percentages: attributes, not inline style, so the
page's CSP (style-src 'self') holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ostinato.domain import events as ev
from ostinato.domain.narrative import duration_words, time_words

MAX_LANES = 300  # a long workflow's first lanes; the tables below the waterfall hold the rest
MIN_WIDTH = 0.004  # an instant still shows as a sliver (0.4 % of the run's span)
TONE_FILL = {"ok": "#1b7f3b", "bad": "#b3261e", "busy": "#0b5cad", "wait": "#8a5a00",
             "off": "#5b636b"}  # SVG fill attributes (no stylesheet needed), ui.css's colours

_CLAIM_ENDS = {  # how a claim ended: its bar's tone
    ev.RunSucceeded: "ok", ev.RunFailed: "bad", ev.AttemptTimedOut: "bad",
    ev.LeaseExpired: "bad", ev.LeaseReleased: "off", ev.RunCancelled: "off",
    ev.RunSuspended: "wait", ev.RunDeadLettered: "bad",
}
_WAITS = {"timer": "sleep", "signal": "signal", "child": "child", "fan_out": "fan-out",
          "paused": "paused"}


@dataclass(frozen=True, slots=True)
class Span:
    """One lane: `kind` execution | step | wait, what it was (`label`, `name`: a step's or a
    wait's name), from `start` to `end` (None: still going), its `tone` (ok, bad, wait, busy,
    off) and, for an execution, the worker and token."""

    kind: str
    label: str
    start: datetime
    end: datetime | None
    tone: str
    name: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Bar:
    """A span laid out: `x` and `width` are fractions of the run's span (0..1, x + width <= 1);
    `open`: still going (drawn to now); `seconds`: how long it took, or has taken so far."""

    span: Span
    x: float
    width: float
    open: bool
    seconds: float

    @property
    def x_pct(self) -> str:
        return f"{self.x * 100:.3f}%"

    @property
    def width_pct(self) -> str:
        return f"{self.width * 100:.3f}%"

    @property
    def took(self) -> str:
        return duration_words(self.seconds) + (" so far" if self.open else "")

    @property
    def fill(self) -> str:
        return TONE_FILL.get(self.span.tone, TONE_FILL["off"])

    def title(self, day: datetime) -> str:
        """The bar's hover text: what, from when, how long."""
        s = self.span
        return (f"{s.label}: from {time_words(s.start, day)}, {self.took}"
                + (f" ({s.detail})" if s.detail else ""))


@dataclass(frozen=True, slots=True)
class Waterfall:
    """The lanes laid out on the span from `start` to `end`, and the axis' ticks."""

    bars: list[Bar]
    start: datetime
    end: datetime
    more: int = 0  # lanes left out past MAX_LANES

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def ticks(self, n: int = 4) -> list[tuple[str, str]]:
        """(x as a percentage, "+1.2 s") at 0, 1/n .. 1 of the span."""
        return [(f"{i * 100 / n:.3f}%", "+" + duration_words(self.seconds * i / n))
                for i in range(n + 1)]


def spans(stream: Iterable[tuple[datetime, ev.Event]],
          running: tuple[int, str, datetime] | None = None) -> list[Span]:
    """The lanes of a run's events `(occurred_at, event)` in order; `running`: the workflow's
    executing step (position, name, since), an open lane. In order of their start."""
    out: list[Span] = []
    claim: tuple[datetime, ev.RunStarted] | None = None
    wait: tuple[datetime, ev.RunSuspended] | None = None
    execution = 0

    def close_wait(at: datetime, tone: str) -> None:
        nonlocal wait
        if wait is not None:
            began, s = wait
            out.append(Span("wait", _wait_label(s), began, at, tone, name=s.name))
            wait = None

    for at, e in stream:
        if isinstance(e, ev.RunStarted):
            execution += 1
            claim = (at, e)
        elif isinstance(e, ev.StepCompleted | ev.StepFailed):
            began = at - timedelta(milliseconds=max(0.0, e.duration_ms))
            ok = isinstance(e, ev.StepCompleted)
            out.append(Span("step", f"step {e.seq} {e.name}", began, at, "ok" if ok else "bad",
                            name=e.name,
                            detail="" if ok else f"{e.error_type}: {e.message}"))
        elif isinstance(e, ev.RunWoken):
            close_wait(at, "ok")
        elif isinstance(e, ev.RunCancelled | ev.RunMarkedFailed | ev.RunMarkedSucceeded):
            close_wait(at, "off")
        if isinstance(e, tuple(_CLAIM_ENDS)) and claim is not None:
            began, s = claim
            out.append(Span("execution", f"execution {execution}", began, at,
                            _CLAIM_ENDS[type(e)], detail=f"worker {s.worker_id}, token "
                                                          f"{s.fencing_token}"))
            claim = None
        if isinstance(e, ev.RunSuspended):
            close_wait(at, "ok")  # a wait not woken before (a pause's): it ends here
            wait = (at, e)
    if claim is not None:
        began, s = claim
        out.append(Span("execution", f"execution {execution}", began, None, "busy",
                        detail=f"worker {s.worker_id}, token {s.fencing_token}"))
    if wait is not None:
        began, s = wait
        out.append(Span("wait", _wait_label(s), began, None, "wait", name=s.name))
    if running is not None:
        seq, name, since = running
        out.append(Span("step", f"step {seq} {name}", since, None, "busy", name=name,
                        detail="running"))
    out.sort(key=lambda s: s.start)  # stable: at one instant, in the log's order
    return out


def _wait_label(s: ev.RunSuspended) -> str:
    what = _WAITS.get(s.reason, s.reason)
    if s.reason == "signal" and s.signal:
        return f"{what} {s.signal}"
    return f"{what} {s.name}"


def layout(lanes: list[Span], start: datetime, end: datetime) -> Waterfall:
    """Each span's start offset and width as fractions of [start, end] (an open span runs to
    `end`, now for a run not final); a span outside is clipped to it, a zero-width one gets
    MIN_WIDTH, so it shows. The first MAX_LANES spans."""
    if lanes:
        start = min(start, *(s.start for s in lanes))
        end = max(end, *(s.end for s in lanes if s.end is not None), start)
    total = (end - start).total_seconds()
    bars = []
    for s in lanes[:MAX_LANES]:
        stop = s.end if s.end is not None else end
        seconds = max(0.0, (stop - s.start).total_seconds())
        if total <= 0:
            x, width = 0.0, 1.0
        else:
            x = min(1.0, max(0.0, (s.start - start).total_seconds() / total))
            width = min(1.0 - x, seconds / total)
            if width < MIN_WIDTH:
                x = min(x, 1.0 - MIN_WIDTH)
                width = MIN_WIDTH
        bars.append(Bar(s, x, width, s.end is None, seconds))
    return Waterfall(bars, start, end, more=max(0, len(lanes) - MAX_LANES))

