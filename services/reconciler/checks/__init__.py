"""The reconciler's checks, each a function of (pool, store, clock, settings) returning how many
items it found or repaired."""
