"""Deprecated: moved to ``runkernel.testing.simulation.invariants``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.invariants import (
    thread_logs as thread_logs,
    check_run as check_run,
)

moved_module(__name__, "runkernel.testing.simulation.invariants")
