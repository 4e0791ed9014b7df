"""Deprecated: moved to ``runkernel.testing.simulation.failfast``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.failfast import (
    EnvironmentFailure as EnvironmentFailure,
    FailFastStore as FailFastStore,
)

warnings.warn(
    "runkernel.simulation.failfast moved to runkernel.testing.simulation.failfast; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
