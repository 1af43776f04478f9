"""Pure policy decisions over values: retries (`retry`), fair dispatch (`fairness`) and limits
(`limits`: token buckets). No I/O, no clock: `now` and
randomness are arguments, so tests are exhaustive and restarts repeat the same decisions."""
