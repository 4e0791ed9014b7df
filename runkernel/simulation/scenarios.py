"""Deprecated: moved to ``runkernel.testing.simulation.scenarios``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.scenarios import (
    PAST as PAST,
    SIM_NOW as SIM_NOW,
    LATER as LATER,
    ToolSpec as ToolSpec,
    Scenario as Scenario,
    catalogue as catalogue,
)

warnings.warn(
    "runkernel.simulation.scenarios moved to runkernel.testing.simulation.scenarios; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
