"""DAGs (docs/DAGS.md): the definition value, its validation and content version (`graph`), and
the decision of what a DAG run does next (`decide`). Pure: no I/O; the run-side commands live in
`ostinato.runs.dags`."""
