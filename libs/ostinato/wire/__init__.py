"""The one home of the wire types: what crosses HTTP between Ostinato and its users.

`ostinato.wire.api` holds the public API's requests and answers (the OpenAPI document is
generated from them), `ostinato.wire.worker` the worker protocol's (the worker-gateway and the
SDK). The server, the client and the SDK all import them from here, so the two ends of a wire
cannot drift. This package imports only msgspec, the domain and the pure schedule, retry and DAG
specs: never the client, the SDK, stores, the database, the bus, the runtime or a service.
"""
