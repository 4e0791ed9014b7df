"""Deprecated: moved to ``runkernel.testing.simulation.history``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.history import (
    CallFate as CallFate,
    Outline as Outline,
    outline as outline,
    recovery_differences as recovery_differences,
)

moved_module(__name__, "runkernel.testing.simulation.history")
