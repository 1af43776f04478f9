"""scheduler: shard leases, the due poll (`tick.fire_due`) and retry release, as duties
(`tick.duties`). What a due job turns into is decided and appended by
`ostinato.jobs.materialise`, shared with the reconciler's repairs."""
