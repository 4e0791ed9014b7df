"""Deprecated: moved to ``runkernel.testing.simulation.engine``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.engine import (
    MAX_ROUNDS as MAX_ROUNDS,
    SimHooks as SimHooks,
    CountingObserver as CountingObserver,
    Trial as Trial,
    ScenarioRun as ScenarioRun,
    recoveries as recoveries,
)
from runkernel.testing.crash import CrashAtEncounters as CrashTargets

warnings.warn(
    "runkernel.simulation.engine moved to runkernel.testing.simulation.engine; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
