"""Deprecated: moved to ``runkernel.adapters.stores.work``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.stores.work import (
    RunSummary as RunSummary,
    STORE_TABLES as STORE_TABLES,
    SUMMARY_COLUMNS as SUMMARY_COLUMNS,
    activation_parent as activation_parent,
    awaited_children as awaited_children,
    has_work as has_work,
    listing_query as listing_query,
    parent_columns as parent_columns,
    parent_from_columns as parent_from_columns,
    state_name as state_name,
    summary_from_row as summary_from_row,
    summary_of as summary_of,
    wake_time as wake_time,
    work_query as work_query,
)

moved_module(__name__, "runkernel.adapters.stores.work")
