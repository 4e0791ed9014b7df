"""Deprecated: moved to ``runkernel.testing.simulation.engine``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.engine import (
    MAX_ROUNDS as MAX_ROUNDS,
    SimHooks as SimHooks,
    CountingObserver as CountingObserver,
    Trial as Trial,
    ScenarioRun as ScenarioRun,
    recoveries as recoveries,
)
from runkernel.testing.crash import CrashAtEncounters as CrashTargets

moved_module(__name__, "runkernel.testing.simulation.engine")
