"""Deprecated: moved to ``runkernel.adapters.stores.memory``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.stores.memory import (
    MemoryStore as MemoryStore,
)

moved_module(__name__, "runkernel.adapters.stores.memory")
