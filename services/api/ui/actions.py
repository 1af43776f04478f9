"""An operator's action from any page of the web UI, one pattern (issue 41 item 3): a form (the
`action_form` macro, templates/macros.html) that opens to a confirmation naming what will change
and a reason field; after its POST a flash saying what was done, with a link to the action's
audit entry (the audit page filtered by the request's id; the `flash` macro draws the link).

A route reads the form with `posted`: the role and CSRF checks (`scope.checked_form`), then the
reason, optional or required as the API's command takes it, at most `MAX_REASON_CHARS`, kept
in the action's audit row (`detail`); the route passes it on to the command where one takes a
reason. Bad input raises `InvalidInput` (422) before anything is changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litestar import Request

from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput
from ostinato.runtime import request_ids
from services.api.ui.scope import AdminScope, UiScope, checked_form

MAX_REASON_CHARS = 1000  # as every API command's reason (ostinato.wire.api.Reason)
AUDIT_MARK = "\x1f"  # a flash's text, this, the request id: the `flash` macro links the latter


@dataclass(frozen=True, slots=True)
class Posted:
    """A checked action form: its fields (strings) and the reason given (None: none)."""

    form: dict[str, Any]
    reason: str | None

    def text(self, name: str) -> str:
        """A field's text, stripped ("" when absent)."""
        value = self.form.get(name)
        return value.strip() if isinstance(value, str) else ""


def reason_of(form: Mapping[str, Any], *, required: bool = False) -> str | None:
    """The posted reason, stripped (None when blank and optional)."""
    raw = form.get("reason")
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        if required:
            raise InvalidInput("a reason is required: say why (it is recorded with the action)",
                               errors=[{"field": "reason", "message": "required"}])
        return None
    if len(text) > MAX_REASON_CHARS:
        raise InvalidInput(f"a reason has at most {MAX_REASON_CHARS} characters, not "
                           f"{len(text)}", errors=[{"field": "reason", "message": "too long"}])
    return text


async def posted(request: Request, ui: UiScope | AdminScope, *, reason_required: bool = False,
                 action: str = roles.OPERATE) -> Posted:
    """The action's form once the session may do `action` and it carries the CSRF token, its
    reason read and recorded in the audit row."""
    form = await checked_form(request, ui, action)
    reason = reason_of(form, required=reason_required)
    if reason is not None:
        ui.audit.detail = f"reason: {reason}"
    return Posted(form, reason)


def done(ui: UiScope | AdminScope, message: str) -> None:
    """The flash the next page shows: what was done, and a link to this request's audit entry."""
    ui.session.flash = f"{message}{AUDIT_MARK}{request_ids.current()}"
