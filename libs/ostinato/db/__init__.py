"""PostgreSQL plumbing: the connection pool, named SQL loaded from `.sql` files, migrations, and
SQLSTATE classification. Business SQL lives next to the module that owns each table."""
