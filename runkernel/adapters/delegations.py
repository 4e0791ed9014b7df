"""Deprecated: moved to ``runkernel.adapters.drive.delegations``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.delegations import (
    ChildFound as ChildFound,
    cancel_child as cancel_child,
    cancel_if_parent_ended as cancel_if_parent_ended,
    child_activation as child_activation,
    ended_children as ended_children,
    find_child as find_child,
    is_quiet as is_quiet,
    parent_of as parent_of,
    parents_to_wake as parents_to_wake,
)

moved_module(__name__, "runkernel.adapters.drive.delegations")
