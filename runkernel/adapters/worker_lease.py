"""Deprecated: moved to ``runkernel.adapters.drive.lease_keeper``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.lease_keeper import (
    APPEND_RETRIES as APPEND_RETRIES,
    LeaseKeeper as LeaseKeeper,
)

moved_module(__name__, "runkernel.adapters.drive.lease_keeper")
