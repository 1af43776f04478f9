"""`PUT|GET|DELETE /v1/alert-sinks[/{name}]`: where a tenant's alerts are delivered (webhooks
receiving Alertmanager's body, routed by the job's owner, with default sinks for the rest), and
`GET /v1/alerts`: the tenant's alerts, firing and resolved (docs/ALERTS.md)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from litestar import delete, get, put
from litestar.params import JSONBody, PathParameter, QueryParameter

from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.stores import alerts as alert_store
from ostinato.wire.api import Alerts, AlertSinkRequest, AlertSinks, AlertSinkView, AlertView
from services.api.auditing import audited
from services.api.scope import Tenant

SinkName = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][\w.-]{0,99}$")]
Limit = Annotated[int, QueryParameter(ge=1, le=1000)]


def _view(row: alert_store.SinkRow) -> AlertSinkView:
    return AlertSinkView(name=row.name, url=row.url, secret_header=row.secret_header,
                         owners=list(row.owners), default=row.is_default,
                         created_at=row.created_at, updated_at=row.updated_at)


def _check(data: AlertSinkRequest) -> None:
    errors = []
    parts = urlsplit(data.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        errors.append({"field": "url", "message": "an http:// or https:// URL with a host"})
    if (data.secret is None) != (data.secret_header is None):
        errors.append({"field": "secret", "message": "secret and secret_header come together"})
    if not data.owners and not data.default:
        errors.append({"field": "owners", "message": "name the owners (teams) it serves, or "
                       "make it a default sink (default: true)"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors),
                           errors=errors)


@put("/v1/alert-sinks/{name:str}", status_code=200, tags=["alerts"],
      opt=audited("alert_sink.put", "alert_sink", "name"))
async def put_sink(name: SinkName, data: JSONBody[AlertSinkRequest],
                   tenant: Tenant) -> AlertSinkView:
    """Create or replace a webhook sink."""
    _check(data)
    tenant.audit.after = {"url": data.url, "owners": sorted(set(data.owners)),
                          "default": data.default}  # never the secret
    return _view(await alert_store.put_sink(
        tenant.conn, tenant.tenant_id, name, url=data.url, secret_header=data.secret_header,
        secret_value=data.secret, owners=sorted(set(data.owners)), is_default=data.default,
        now=tenant.clock.now()))


@get("/v1/alert-sinks", tags=["alerts"])
async def list_sinks(tenant: Tenant) -> AlertSinks:
    return AlertSinks(items=[_view(r) for r in await alert_store.sinks_of(tenant.conn,
                                                                          tenant.tenant_id)])


@delete("/v1/alert-sinks/{name:str}", status_code=204, tags=["alerts"],
         opt=audited("alert_sink.delete", "alert_sink", "name"))
async def delete_sink(name: SinkName, tenant: Tenant) -> None:
    """Remove a sink and the notifications still waiting for it."""
    async with tenant.conn.transaction():
        if not await alert_store.delete_sink(tenant.conn, tenant.tenant_id, name):
            raise NotFound(f"no alert sink {name!r}")


@get("/v1/alerts", tags=["alerts"])
async def list_alerts(tenant: Tenant, limit: Limit = 200) -> Alerts:
    """The tenant's alerts: firing first, then resolved, newest first."""
    rows = await alert_store.alerts_of(tenant.conn, tenant.tenant_id, limit)
    return Alerts(items=[AlertView(key=r.alert_key, rule=r.rule, status=r.status, owner=r.owner,
                                   labels=r.labels, annotations=r.annotations,
                                   starts_at=r.starts_at, ends_at=r.ends_at) for r in rows])


ROUTES = [put_sink, list_sinks, delete_sink, list_alerts]
