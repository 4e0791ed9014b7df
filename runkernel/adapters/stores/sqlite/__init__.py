"""The embedded SQLite store (``sqlite:///path.db``), the default: ``SqliteStore``, opened
from its URL by ``open_sqlite`` (both in ``store``); the file checks and connection it
opens with (``opening``), its schema (``schema``) and the upgrade of a file an older
runkernel made (``migrate``)."""

from runkernel.adapters.stores.sqlite.store import SqliteStore as SqliteStore
from runkernel.adapters.stores.sqlite.store import open_sqlite as open_sqlite
