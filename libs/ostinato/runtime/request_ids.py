"""Request ids: every HTTP request gets one, the client's own `X-Request-Id` when it is a sane
token, else a fresh UUIDv7. It is echoed in the answer, bound to every log line of the request
and recorded in the audit trail, so one id ties a client's call to its logs and its audit row."""

from __future__ import annotations

import re
from contextvars import ContextVar

import structlog
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ostinato.domain.ids import new_id

HEADER = "x-request-id"
_SANE = re.compile(rb"^[A-Za-z0-9._:@/+=-]{1,128}$")  # never a log- or header-injection vector
_current: ContextVar[str] = ContextVar("ostinato_request_id", default="")


def current() -> str:
    """The id of the request being handled ("" outside one)."""
    return _current.get()


def _from(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER.encode() and _SANE.match(value):
            return value.decode()
    return str(new_id())


class RequestIds:
    """ASGI middleware around the whole app (outside routing), like BodyLimit."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _from(scope)
        token = _current.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()),
                                      (HEADER.encode(), request_id.encode())]
            await send(message)

        try:
            with structlog.contextvars.bound_contextvars(request_id=request_id):
                await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)
