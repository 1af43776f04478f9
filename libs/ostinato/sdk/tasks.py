"""Handler registration: ``@task("name")`` and the registry a Worker builds from it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Handler", "Registered", "Task", "registry", "task"]

Handler = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Task:
    """A handler with its task name; still callable directly, like the plain function."""

    name: str
    fn: Handler

    def __call__(self, payload: Any) -> Any:
        return self.fn(payload)


def task(name: str) -> Callable[[Handler], Task]:
    """Name a handler; registration stays explicit: pass the result to ``Worker([...])``."""

    def decorate(fn: Handler) -> Task:
        return Task(name=name, fn=fn)

    return decorate


@dataclass(frozen=True, slots=True)
class Registered:
    """A handler as the worker runs it: async ones as tasks, sync ones in a thread pool."""

    fn: Handler
    is_async: bool


def registry(handlers: Mapping[str, Handler] | Sequence[Task]) -> dict[str, Registered]:
    """Task name -> handler; rejects nameless handlers, duplicates and an empty list."""
    pairs = (
        list(handlers.items())
        if isinstance(handlers, Mapping)
        else [(t.name, t) if isinstance(t, Task) else ("", t) for t in handlers]
    )
    found: dict[str, Registered] = {}
    for name, handler in pairs:
        fn = handler.fn if isinstance(handler, Task) else handler
        if not name or not callable(fn):
            raise TypeError(f"handlers need a task name and a callable, got {handler!r}")
        if name in found:
            raise ValueError(f"task {name!r} registered twice")
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            type(fn).__call__  # callable objects with an async __call__
        )
        found[name] = Registered(fn=fn, is_async=is_async)
    if not found:
        raise ValueError("a Worker needs at least one handler")
    return found
