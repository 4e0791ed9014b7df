"""The stores, in rooms: the contract every store keeps (``contract``) and the parts
every store shares (the summary row ``work``, the lease rules ``leases``, the stored forms
``serial``, row decoding ``decode``, the damage checks ``damage``, ``export``, the
reads a store may fold ``folded_reads``); the memory store (``memory``); the SQL layer
the two SQL stores share (``sql``: ``SqlStore``, the statements, the dialect that holds
their differences, the migration steps); the SQLite store (``sqlite``) and the
PostgreSQL store (``postgres``); the store kinds a URL names, and opening one
(``registry``); and the read views the CLI answers from (``inspect_view``,
``inspect_calls``, ``run_views``).

A store knows nothing of who drives a Run: modules here import only ``runkernel.specs``,
``runkernel.kernel`` and the base module ``runkernel.errors``, never ``drive``, ``worker``
or the CLI (``tests/proofs/test_layers.py``). Inside, the rooms import down only: ``postgres`` and
``sqlite`` import ``sql``, which imports the shared top-level modules, which import none
of the rooms (``registry`` alone opens them)."""
