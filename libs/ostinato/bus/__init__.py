"""The Kafka bus: topic names, tenant keying, the message envelope, trace headers, and consumers
that handle a batch in one PostgreSQL transaction before committing offsets.

Kafka is the transport, PostgreSQL the truth (DESIGN invariant 5): messages are produced only by
the outbox relay, from rows written in the same transaction as the events they carry. Every
consumer is idempotent because a message is only a wake-up: the dispatcher decides from the
waiting runs in PostgreSQL, the gateway's claim locks queued runs there, so a duplicate, replayed
or lost message costs one look more or less and changes nothing (the reconciler finds what a lost
one delayed).
"""
