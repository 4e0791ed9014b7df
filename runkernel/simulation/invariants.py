"""Deprecated: moved to ``runkernel.testing.simulation.invariants``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.invariants import (
    thread_logs as thread_logs,
    check_run as check_run,
)

warnings.warn(
    "runkernel.simulation.invariants moved to runkernel.testing.simulation.invariants; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
