"""Deprecated: moved to ``runkernel.testing.simulation.scenarios``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.scenarios import (
    PAST as PAST,
    SIM_NOW as SIM_NOW,
    LATER as LATER,
    ToolSpec as ToolSpec,
    Scenario as Scenario,
    catalogue as catalogue,
)

moved_module(__name__, "runkernel.testing.simulation.scenarios")
