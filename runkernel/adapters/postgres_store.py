"""Deprecated: moved to ``runkernel.adapters.stores.postgres``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.stores.postgres import (
    LOST_CONNECTION_ATTEMPTS as LOST_CONNECTION_ATTEMPTS,
    PostgresStore as PostgresStore,
)

moved_module(__name__, "runkernel.adapters.stores.postgres")
