"""The PostgreSQL store (``postgresql://...``, the ``postgres`` extra): ``PostgresStore``,
opened from its URL by ``open_postgres`` (both in ``store``), over the shared SQL layer
(``sql``: the PostgreSQL side of it); its session and pool (``connection``), a commit's
statements in one round trip (``commit``) and what the commit saw (``echo``), the
pick-up in one round trip (``pick_up``), the schema and its creation and upgrade
(``schema``), and ``simulate``'s claim of a store (``claim``).

Importing this package imports psycopg; ``stores.registry`` imports it only when a
PostgreSQL URL is used."""

from runkernel.adapters.stores.postgres.store import PostgresStore as PostgresStore
from runkernel.adapters.stores.postgres.store import open_postgres as open_postgres
