"""Deprecated: moved to ``runkernel.testing.simulation.failfast``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.failfast import (
    EnvironmentFailure as EnvironmentFailure,
    FailFastStore as FailFastStore,
)

moved_module(__name__, "runkernel.testing.simulation.failfast")
