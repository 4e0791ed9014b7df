"""The stores: the contract every store keeps (``contract``), the parts they share (the
summary row ``work``, the lease rules ``leases``, the stored forms ``serial``, the damage
checks ``damage``, ``export``), the memory, SQLite and PostgreSQL stores over one shared
SQL layer (``sql_shared``, ``sql_statements``, ``sql_migrate``, row decoding ``decode``),
opening one by URL (``urls``), and the read views the CLI answers from
(``inspect_view``, ``inspect_calls``).

A store knows nothing of who drives a Run: modules here import only ``runkernel.specs``,
``runkernel.kernel`` and the base modules (``runkernel.errors``, ``runkernel._deprecation``,
``runkernel._compat``), never ``drive``, ``worker`` or the CLI
(``tests/proofs/test_layers.py``)."""
