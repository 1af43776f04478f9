"""Ownership leases judged by the database clock: attempt leases with fencing tokens for workers
(`attempts`, used by the worker-gateway and the reconciler) and shard leases with epochs for
schedulers (`shard`). Both are stores over `sql/leases.sql` returning typed rows."""
