"""The run-event log: append with optimistic concurrency, read streams, keep read models and the
outbox in step — all in the caller's transaction.

    writer ──append(events)──> events (append-only)      one transaction
                          ├──> read models (projections)
                          └──> outbox ──relay──> Kafka   (after commit)

UPDATE, DELETE and TRUNCATE on `events` are refused by a trigger. Read models are a fold of the
log: `rebuild()` recomputes them and a test proves the result equals the live rows.
"""
