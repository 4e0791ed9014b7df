"""Deprecated: moved to ``runkernel.adapters.stores.contract``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.stores.contract import (
    CONFLICT_RULES as CONFLICT_RULES,
    Checkpoint as Checkpoint,
    InboxEntry as InboxEntry,
    Lease as Lease,
    Reconciliation as Reconciliation,
    Settlement as Settlement,
    Store as Store,
    Writer as Writer,
    judge_append as judge_append,
)

moved_module(__name__, "runkernel.adapters.stores.contract")
