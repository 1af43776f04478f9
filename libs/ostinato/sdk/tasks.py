"""Handler registration: ``@task("name")`` and the registry a Worker builds from it.

Every handler has a version: declared (``@task("billing", version=3)``) or derived from its
code (a hash of its source, else of its bytecode), so a changed handler is a new version even
when nobody thought to say so. Workers declare the version of each task they serve with every
claim; a workflow run is pinned to the version that first started it (docs/WORKFLOWS.md,
versioning).

A task may also declare its payload's type (``@task("billing", payload=Charge)``, a
``msgspec.Struct`` or any type msgspec can convert into) and that type's version
(``payload_version``, 1 by default): the worker registers the type's JSON Schema with the
gateway before it claims, the API validates submissions against it and records the version on
the run, and the handler receives the payload converted into the type. ``accepts``: the payload
versions the handler can read (default: only ``payload_version``); a run submitted under
another version is not given to this worker (docs/WORKFLOWS.md, payload schemas).
"""

from __future__ import annotations

import hashlib
import inspect
import marshal
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ostinato.sdk.errors import PermanentError

__all__ = ["Handler", "PayloadSpec", "Registered", "Task", "code_version", "decode_payload",
           "payload_spec", "registry", "task"]

Handler = Callable[[Any], Any]
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


@dataclass(frozen=True, slots=True)
class Task:
    """A handler with its task name; still callable directly, like the plain function.

    ``version``: the declared one, else derived from ``source`` (the user's function: for a
    workflow, not its wrapper). ``workflow``: its runs are pinned to their version."""

    name: str
    fn: Handler
    version: str | None = None
    workflow: bool = False
    source: Callable[..., Any] | None = None
    payload: PayloadSpec | None = None  # the declared payload type, its version and accepts

    def __call__(self, payload: Any) -> Any:
        return self.fn(payload)

    @property
    def served_version(self) -> str:
        return self.version or code_version(self.source or self.fn)


def task(name: str, *, version: str | int | None = None, payload: Any = None,
         payload_version: int | None = None,
         accepts: Sequence[int] | None = None) -> Callable[[Handler], Task]:
    """Name a handler; registration stays explicit: pass the result to ``Worker([...])``.
    ``version``: declare it (e.g. ``3``); by default it is derived from the code.
    ``payload``: the payload's type (a ``msgspec.Struct``): submissions are validated against
    its JSON Schema and the handler gets the converted value; ``payload_version`` (default 1)
    names that schema, ``accepts`` the versions the handler can read (default: only it)."""
    declared = checked_version(version)
    spec = payload_spec(name, payload, payload_version, accepts)

    def decorate(fn: Handler) -> Task:
        return Task(name=name, fn=fn, version=declared, payload=spec)

    return decorate


@dataclass(frozen=True, slots=True)
class PayloadSpec:
    """A task's declared payload: the type handlers receive, the version of its schema (what
    submissions are validated against) and the payload versions the handler can read."""

    type: Any
    version: int
    accepts: tuple[int, ...]
    schema: dict[str, Any]  # msgspec.json.schema(type): what the worker registers


def payload_spec(name: str, payload: Any, payload_version: int | None,
                 accepts: Sequence[int] | None) -> PayloadSpec | None:
    """Check a task's payload declaration at decoration time, so a mistake fails at import
    rather than at the first run: None when the task declares no payload."""
    if payload is None:
        if payload_version is not None or accepts is not None:
            raise ValueError(f"task {name!r}: payload_version and accepts need payload=")
        return None
    version = 1 if payload_version is None else payload_version
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"task {name!r}: payload_version is an integer >= 1, got "
                         f"{payload_version!r}")
    versions = (version,) if accepts is None else tuple(accepts)
    if not versions or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                           for v in versions):
        raise ValueError(f"task {name!r}: accepts is a non-empty list of integers >= 1, got "
                         f"{accepts!r}")
    if version not in versions:
        raise ValueError(f"task {name!r}: accepts {list(versions)} must include its own "
                         f"payload_version {version}")
    try:
        schema = msgspec.json.schema(payload)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"task {name!r}: msgspec cannot describe payload type {payload!r}: "
                        f"{exc}") from exc
    return PayloadSpec(type=payload, version=version, accepts=tuple(sorted(set(versions))),
                       schema=schema)


def decode_payload(task_name: str, spec: PayloadSpec, payload: Any) -> Any:
    """The claimed run's payload converted into the declared type; a payload that does not
    convert is a ``PermanentError`` of type ``invalid_payload`` naming the field (another
    attempt would read the same payload), so the handler never sees a value of another shape."""
    try:
        return msgspec.convert(payload, spec.type)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = text.replace("`$", "`payload") if "- at `$" in text else f"{text} - at `payload`"
        name = getattr(spec.type, "__name__", repr(spec.type))
        raise PermanentError(f"invalid payload for task {task_name!r} (expected {name}, payload "
                             f"version {spec.version}): {where}",
                             type="invalid_payload") from None


def checked_version(version: str | int | None) -> str | None:
    """A declared version as text: 1 to 64 letters, digits and ``._+-``."""
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, str | int):
        raise TypeError(f"a version is a string or an integer, got {version!r}")
    text = str(version)
    if not _VERSION.fullmatch(text):
        raise ValueError(f"version {text!r}: 1 to 64 letters, digits and ._+- (starting with "
                         "a letter or digit)")
    return text


def code_version(fn: Callable[..., Any]) -> str:
    """A version derived from the code: 12 hex digits of the SHA-256 of the function's source
    (dedented), or of its bytecode when the source is not available."""
    target = inspect.unwrap(fn)
    try:
        data = textwrap.dedent(inspect.getsource(target)).encode()
    except (OSError, TypeError):
        code = getattr(target, "__code__", None) or getattr(
            vars(type(target)).get("__call__"), "__code__", None)  # a callable object
        data = marshal.dumps(code) if code is not None else repr(target).encode()
    return "c" + hashlib.sha256(data).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Registered:
    """A handler as the worker runs it: async ones as tasks, sync ones in a thread pool."""

    fn: Handler
    is_async: bool
    version: str = ""
    workflow: bool = False
    payload: PayloadSpec | None = None  # decode the payload into payload.type before calling


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
        if isinstance(handler, Task):
            found[name] = Registered(fn=fn, is_async=is_async, version=handler.served_version,
                                     workflow=handler.workflow, payload=handler.payload)
        else:
            found[name] = Registered(fn=fn, is_async=is_async, version=code_version(fn))
    if not found:
        raise ValueError("a Worker needs at least one handler")
    return found
