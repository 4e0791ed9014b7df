"""Deprecated: moved to ``runkernel.testing.simulation.contents``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.contents import (
    check_contents as check_contents,
)

warnings.warn(
    "runkernel.simulation.contents moved to runkernel.testing.simulation.contents; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
