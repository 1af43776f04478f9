"""The Kafka bus: topic names, tenant keying, the message envelope, trace headers, and consumers
that handle a batch in one PostgreSQL transaction before committing offsets.

Kafka is the transport, PostgreSQL the truth (DESIGN invariant 5): messages are produced only by
the outbox relay, from rows written in the same transaction as the events they carry, and every
consumer deduplicates by event id in the `consumer_ledger` table.
"""
