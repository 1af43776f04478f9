"""Bulk actions by query, as tracked operations (docs/OPERATIONS.md): `filters` turns a request's
filter into a selection (pure), `work` creates operations and works through them in batches."""
