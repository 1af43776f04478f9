"""Searchable attributes, declared per tenant (docs/SEARCH_ATTRIBUTES.md):
`PUT /v1/search-attributes/{name}` (type), `GET /v1/search-attributes`,
`DELETE /v1/search-attributes/{name}`. Declaring is an operator's change (audited); jobs and
runs are then given values at submission and by `ctx.upsert_attributes`, and filtered with
`where` (GET /v1/runs, operations)."""

from __future__ import annotations

from typing import Annotated

from litestar import Response, delete, get, put
from litestar.params import JSONBody, PathParameter

from ostinato.domain import attributes
from ostinato.domain.errors import NotFound
from ostinato.stores import attributes as store
from ostinato.wire.api import SearchAttributeList, SearchAttributeRequest, SearchAttributeView
from services.api.auditing import audited
from services.api.scope import Tenant

AttributeName = Annotated[str, PathParameter(min_length=1, max_length=200)]


def _view(d: store.Declared) -> SearchAttributeView:
    return SearchAttributeView(name=d.name, type=d.type, created_at=d.created_at, actor=d.actor)


@put("/v1/search-attributes/{name:str}", status_code=201, tags=["search-attributes"],
     opt=audited("search_attribute.declare", "search_attribute", "name"))
async def declare_attribute(name: AttributeName, data: JSONBody[SearchAttributeRequest],
                            tenant: Tenant) -> Response[SearchAttributeView]:
    """Declare `name` with its type for the tenant's jobs and runs: 201, or 200 when it is
    declared already with that type. Another type for a declared name, a bad name or one over
    the tenant's cap (`search_attributes_cap`, 20 by default) is a 422."""
    async with tenant.conn.transaction():
        await store.lock(tenant.conn, tenant.tenant_id)
        declared = await store.types_of(tenant.conn, tenant.tenant_id)
        added = attributes.check_declaration(name, data.type, declared,
                                             tenant.settings.search_attributes_cap)
        if added:
            await store.declare(tenant.conn, tenant.tenant_id, name, data.type,
                                now=tenant.clock.now(), actor=tenant.actor)
        row = next(d for d in await store.declared(tenant.conn, tenant.tenant_id)
                   if d.name == name)
    tenant.audit.after = {"name": name, "type": data.type}
    tenant.audit.status = 201 if added else 200
    return Response(_view(row), status_code=201 if added else 200)


@get("/v1/search-attributes", tags=["search-attributes"])
async def list_attributes(tenant: Tenant) -> SearchAttributeList:
    """The tenant's declared search attributes, by name, and the cap."""
    return SearchAttributeList(
        items=[_view(d) for d in await store.declared(tenant.conn, tenant.tenant_id)],
        cap=tenant.settings.search_attributes_cap)


@delete("/v1/search-attributes/{name:str}", status_code=204, tags=["search-attributes"],
        opt=audited("search_attribute.remove", "search_attribute", "name"))
async def remove_attribute(name: AttributeName, tenant: Tenant) -> None:
    """Forget a declaration (it no longer counts towards the cap, and new values and filters
    of that name are refused); values already stored stay in the runs' history."""
    if not await store.remove(tenant.conn, tenant.tenant_id, name):
        raise NotFound(f"no search attribute {name!r}")
    tenant.audit.before = {"name": name}


ROUTES = [declare_attribute, list_attributes, remove_attribute]
