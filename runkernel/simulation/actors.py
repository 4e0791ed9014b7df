"""Deprecated: the scripted actors moved to ``runkernel.testing`` (``ScriptedModel``,
``ScriptedTool``, formerly ``SimTool``, ``ScriptedGate``, ``CountingIds`` ...); this alias
goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.fixed import CountingIds as CountingIds
from runkernel.testing.scripted import (
    CANCEL_DURING as CANCEL_DURING,
    CHECKPOINT_MARK as CHECKPOINT_MARK,
    DELEGATE as DELEGATE,
    FAIL as FAIL,
    LOST as LOST,
    OK as OK,
    PERMANENT_FAILURE as PERMANENT_FAILURE,
    RETRY as RETRY,
    SCHEDULE as SCHEDULE,
    TRANSIENT_FAILURE as TRANSIENT_FAILURE,
    TRUTH as TRUTH,
    Execution as Execution,
    ScriptedGate as ScriptedGate,
    ScriptedModel as ScriptedModel,
    ScriptedTool as ScriptedTool,
    StepScript as StepScript,
    World as World,
)
from runkernel.testing.scripted import ScriptedTool as SimTool
from runkernel.testing.simulation.engine import CountingObserver as CountingObserver, SimHooks as SimHooks

moved_module(__name__, "runkernel.testing")
