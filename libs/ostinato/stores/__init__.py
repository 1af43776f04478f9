"""One store per read-model table or aggregate: its named SQL (`sql/<store>.sql`) and the typed
rows (msgspec Structs) it returns. Callers ask a store, never a named query, and read fields by
attribute, never by string.

Stores only read and lock. The read models are written by the projector alone
(`ostinato.eventlog.readmodels`), in the transaction of the append, so that they stay a fold of
the log.

`runs`, `jobs`, `dead_letters`, `calendars`, `limits` (limits, pool pauses, queue load).
tests/integration/test_stores.py checks that every store query prepares and returns exactly the
columns of its row type.
"""
