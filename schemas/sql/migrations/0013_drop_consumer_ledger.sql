-- 0013: the consumer ledger goes. Nothing ever wrote it: every Kafka consumer of Ostinato is
-- idempotent because its messages are only wake-ups (the dispatcher decides from the waiting
-- runs in PostgreSQL, the gateway's claim locks queued runs there), so a duplicate or replayed
-- message costs one more look and changes nothing.
DROP TABLE IF EXISTS consumer_ledger;
