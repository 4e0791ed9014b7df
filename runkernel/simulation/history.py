"""Deprecated: moved to ``runkernel.testing.simulation.history``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.history import (
    CallFate as CallFate,
    Outline as Outline,
    outline as outline,
    recovery_differences as recovery_differences,
)

warnings.warn(
    "runkernel.simulation.history moved to runkernel.testing.simulation.history; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
