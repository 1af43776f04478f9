"""The run-event log: append with optimistic concurrency, read streams, keep read models and the
outbox in step — all in the caller's transaction. Every event to append is made by
`records.StreamHead.next`, which numbers it and checks a run event against the lifecycle; on the
hot path, `columns.py` appends a hop's batch as arrays in one statement (the dispatcher checks
its runs' moves against the same lifecycle table, and the scheduler's runs are new).

    writer ──append(events)──> events (append-only)      one transaction
                          ├──> read models (projections)
                          └──> outbox ──relay──> Kafka   (after commit)

UPDATE, DELETE and TRUNCATE on `events` are refused by a trigger. Read models are a fold of the
log: `rebuild.rebuild()` recomputes them and tests prove the result equals the live rows, and
that the `runs` row equals the domain's `fold()` of its stream. Reading the read models is the
stores' job (`ostinato.stores`).
"""
