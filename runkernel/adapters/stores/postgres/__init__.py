"""The PostgreSQL store (``postgresql://...``, the ``postgres`` extra): ``PostgresStore``,
opened from its URL by ``open_postgres`` (both in ``store``), over the shared SQL layer
(``sql``: the PostgreSQL side of it); its session and pool (``connection``), a commit's
statements (``commit``) sent in one round trip (``send``) and what the commit saw
(``echo``), the pick-up in one round trip (``pick_up``), inbox writes (``inbox``), the
schema and its creation and upgrade (``schema``), and ``simulate``'s claim of a store
(``claim``). The modules that talk to the server through the session (``connection``,
``pick_up``, ``inbox``, ``send``) are generated from async sources beside them
(``connection_async``...) by ``tools/async_to_sync.py``.

Importing this package imports psycopg; ``stores.registry`` imports it only when a
PostgreSQL URL is used."""

from runkernel.adapters.stores.postgres.store import PostgresStore as PostgresStore
from runkernel.adapters.stores.postgres.store import open_postgres as open_postgres
