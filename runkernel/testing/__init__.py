"""What runkernel's own tests share with users who test their agents: ports that follow a
script, fixed ids and a clock the test moves, crash injection from the outside, the one
test-data builder, and the crash simulator (``runkernel.testing.simulation``).

Test your own agent under crashes. Give the runtime a ``CrashingStore`` (and, for a
crash after a tool's effect, tools wrapped by ``crashing_tools``) with a plan of where
to die; then continue with a fresh runtime that knows nothing but the store::

    from runkernel import Runtime, ToolRegistry, open_store
    from runkernel.kernel import EndCauseKind, Message, RecoveryMode, Role
    from runkernel.testing import (
        Boundary, CountingIds, CrashAt, CrashingStore, ManualClock, Position,
        ScriptedModel, ScriptedTool, SimulatedCrash, StepScript, World, crashing_tools,
    )

    store = open_store("memory:")
    world = World.new(store)                      # what really ran downstream
    tools = ToolRegistry({"charge": ScriptedTool("charge", world, mode=RecoveryMode.INDETERMINATE)})
    model = ScriptedModel({"r1": (
        StepScript("charging", (("charge", {"cents": 500}),)),
        StepScript("done", end=EndCauseKind.COMPLETED),
    )})
    ids, clock = CountingIds("t"), ManualClock()

    plan = CrashAt(Boundary.AFTER_EFFECT, Position.CALL_RESULT)  # the card was charged, then we died
    dying = Runtime(CrashingStore(store, plan), model, crashing_tools(tools, plan), ids=ids, clock=clock.iso)
    try:
        dying.start("thread-1", "r1", (Message(Role.USER, "pay the invoice"),))
    except SimulatedCrash:
        pass                                      # only the store survives
    outcome = Runtime(store, model, tools, ids=ids, clock=clock.iso).drive("r1")
    assert len(world.executions) == 1             # never charged twice: the call is Indeterminate

The same ``CrashingStore`` kills a push-mode ``Driver`` or a ``Worker``; a
``CrashAtEncounters`` plan crashes at the n-th boundary of any kind, for a sweep over
every boundary a Run passes (count them first with a plan that never fires).

Build committed data for a unit test through the kernel itself::

    from runkernel.testing import Builder

    run = Builder("thread-1", policies).start("r1").feed(InferenceResult(...), GateVerdict(...))
    store.append(run.commits[0]); ...; recover(run.snapshot, policies)

``Builder`` feeds each input to ``decide`` (which must accept it), ``propose(*tools)``
feeds the inference result that opens a batch of one call per tool, ``crash()`` continues
as ``recover`` says, and ``commit()`` takes a hand-made commit that ``validate_commit``
accepts, only for states no ``decide`` builds. ``text_run``, ``tool_run``,
``awaiting_run`` and ``delegating_run`` are ready-made runs (those of the store contract
suite).

Call a tool body directly, as a driver would, with ``invocation_scope(RunCall(...))``:
inside it ``runkernel.current_invocation()`` answers that call (its operation id, the
idempotency key; its lease epoch, the fencing token).

Crash-test your own app at every boundary of its Run, with a report of what broke and of
each tool's extra executor starts: ``runkernel.testing.crashtest`` (``crashtest(app,
scenario) -> CrashReport``; ``runkernel crashtest --app MODULE:ATTR``).

No library module imports this package except the CLI's ``simulate`` and ``crashtest``
commands, lazily.
"""

from __future__ import annotations

from runkernel.adapters.drive.invocation import invocation_scope
from runkernel.conformance.runs import (
    Builder,
    DelegatingRun,
    activate,
    awaiting_run,
    delegating_run,
    step,
    text_run,
    tool_run,
)
from runkernel.testing.crash import (
    Boundary,
    CrashAt,
    CrashAtEncounters,
    CrashingStore,
    CrashPlan,
    Failure,
    NeverCrash,
    Position,
    SimulatedCrash,
    crashing_tools,
    position_of,
)
from runkernel.testing.fixed import CountingIds, ManualClock
from runkernel.testing.scripted import (
    CANCEL_DURING,
    CHECKPOINT_MARK,
    DELEGATE,
    FAIL,
    LOST,
    OK,
    RETRY,
    SCHEDULE,
    TRUTH,
    Execution,
    ScriptedGate,
    ScriptedModel,
    ScriptedTool,
    StepScript,
    World,
)

__all__ = [
    # crash injection
    "Boundary",
    "CrashAt",
    "CrashAtEncounters",
    "CrashPlan",
    "CrashingStore",
    "Failure",
    "NeverCrash",
    "Position",
    "SimulatedCrash",
    "crashing_tools",
    "position_of",
    # ports that follow a script, and the world downstream of them
    "CANCEL_DURING",
    "CHECKPOINT_MARK",
    "DELEGATE",
    "FAIL",
    "LOST",
    "OK",
    "RETRY",
    "SCHEDULE",
    "TRUTH",
    "Execution",
    "ScriptedGate",
    "ScriptedModel",
    "ScriptedTool",
    "StepScript",
    "World",
    # fixed ids and time, and a tool's context
    "CountingIds",
    "ManualClock",
    "invocation_scope",
    # the one test-data builder, and the runs made with it
    "Builder",
    "DelegatingRun",
    "activate",
    "awaiting_run",
    "delegating_run",
    "step",
    "text_run",
    "tool_run",
]
