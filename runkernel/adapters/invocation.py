"""Deprecated: moved to ``runkernel.adapters.drive.invocation``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.invocation import (
    NoInvocation as NoInvocation,
    current_invocation as current_invocation,
    invocation_scope as invocation_scope,
)

moved_module(__name__, "runkernel.adapters.drive.invocation")
