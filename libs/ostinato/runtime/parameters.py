"""A query parameter a route does not take is refused, never ignored.

`GET /v1/runs?task=x` on a route without a `task` filter once answered every run: a script
that filtered and then acted would have acted on everything. Each documented route's query
parameters are read from Litestar's own model of the handler (its parameters and those of its
dependencies, under their wire names), so a new route is covered without saying so; anything
else in the query string is a 422 naming it (`instants.check_instants` raises it, after the
key check on a route that takes a key). Routes outside the document (the web UI's HTML forms,
the probes, the OpenAPI and static files) are left alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from litestar import Request
from litestar.handlers import HTTPRouteHandler

MESSAGE = "unknown query parameter"


def unknown_parameters(sent: Iterable[str], declared: frozenset[str]) -> list[str]:
    """The names in `sent` that are not `declared`, each once, in the order first sent."""
    return list(dict.fromkeys(name for name in sent if name not in declared))


@functools.cache
def declared_parameters(handler: HTTPRouteHandler,
                        path_parameters: frozenset[str]) -> frozenset[str] | None:
    """The query names the handler reads (None: any, it takes the whole query string)."""
    model = handler.create_kwargs_model(path_parameters=dict.fromkeys(path_parameters))  # type: ignore[arg-type]
    if "query" in model.expected_reserved_kwargs:
        return None
    return frozenset(p.field_alias for p in model.expected_query_params)


def unknown_parameter_errors(request: Request) -> list[dict[str, str]]:
    """A 422's `errors` for each query parameter the matched route does not take."""
    handler = request.route_handler
    if not isinstance(handler, HTTPRouteHandler) or not handler.include_in_schema or \
            not request.scope.get("query_string"):
        return []
    declared = declared_parameters(handler, frozenset(request.path_params))
    if declared is None:
        return []
    return [{"field": name, "message": MESSAGE}
            for name in unknown_parameters(request.query_params.keys(), declared)]
