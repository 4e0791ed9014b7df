"""The SQL layer the SQLite and PostgreSQL stores share, written once: ``SqlStore``
(``shared``: the reads, inbox, checkpoints, reconciliations, lease rules and listing of
both), the statements a commit writes and a Run's history read by key (``statements``),
the SQL differences between the two databases in one value (``dialect``), and the steps
a schema migration of either takes (``migrate``). Every statement is written once, in
``?`` style; a store's dialect says how its database takes it.

Nothing here imports a database driver: ``sqlite3`` and psycopg are the stores' own
(``stores.sqlite``, ``stores.postgres``)."""
