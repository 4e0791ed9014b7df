"""Deprecated: moved to ``runkernel.adapters.stores.sqlite``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.stores.sqlite import (
    LAYOUT as LAYOUT,
    SCHEMA_NAME as SCHEMA_NAME,
    SCHEMA_VERSION as SCHEMA_VERSION,
    SqliteStore as SqliteStore,
)

moved_module(__name__, "runkernel.adapters.stores.sqlite")
