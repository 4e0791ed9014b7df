"""Assertions that a committed state, and a commit, fit the spec's two machines (the
python-statemachine declarations of ``runkernel.specs.machines``), for the property
tests of ``decide`` and ``recover``.
"""

from __future__ import annotations

from runkernel.kernel.edges import CallPhase, call_phase, run_phase
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    Ended,
    RunSnapshot,
    ThreadCommit,
    is_terminal,
)
from runkernel.specs.machines import RunMachine, ToolCallMachine, spec_edges, state_names

RUN_STATES = frozenset(state_names(RunMachine))
CALL_STATES = frozenset(state_names(ToolCallMachine))
RUN_EDGES = frozenset((e.source, e.target) for e in spec_edges(RunMachine))
CALL_EDGES = frozenset((e.source, e.target) for e in spec_edges(ToolCallMachine))


# --- helpers ---------------------------------------------------------------------------


def assert_spec_state(state: RunSnapshot) -> None:
    """Only states of the spec's machines, shaped as the design says."""
    assert run_phase(state.state).value in RUN_STATES
    batch = state.batch
    awaiting = []
    if batch is not None:
        for call in batch.calls:
            phase = CallPhase.FINALIZED if batch.finalized else call_phase(call.status)
            assert phase.value in CALL_STATES
            if batch.finalized:
                assert is_terminal(call.status), f"finalized batch holds open call {call}"
            if isinstance(call.status, CallAwaiting):
                awaiting.append(call)
    if isinstance(state.state, Awaiting):
        assert [c.call_id for c in awaiting] == [state.state.ticket.call_id]
    else:
        assert not awaiting, "a call waits while its Run does not"
    if isinstance(state.state, Ended):
        assert batch is None or batch.finalized, "an Ended Run keeps an open batch"


def assert_spec_edges(before: RunSnapshot | None, commit: ThreadCommit) -> None:
    """The commit moves the Run and each call along edges of the spec's machines."""
    source = run_phase(before.state).value if before is not None else None
    assert (source, run_phase(commit.disposition).value) in RUN_EDGES
    old = before.batch if before is not None else None
    new = commit.batch
    if new is None:
        return
    if old is None or old.batch_id != new.batch_id:
        for call in new.calls:
            assert (None, call_phase(call.status).value) in CALL_EDGES
        return
    for old_call, new_call in zip(old.calls, new.calls):
        if old_call.status != new_call.status:
            edge = (call_phase(old_call.status).value, call_phase(new_call.status).value)
            assert edge in CALL_EDGES, f"{new_call.call_id}: {edge} is no spec edge"
    if new.finalized and not old.finalized:
        for call in new.calls:
            assert (call_phase(call.status).value, CallPhase.FINALIZED.value) in CALL_EDGES
