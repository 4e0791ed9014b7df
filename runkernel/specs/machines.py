"""The two machines, declared with python-statemachine using the design's names.

This is the spec, never the engine: python-statemachine dispatches a few thousand
events a second, far too slow for the hot path. The kernel's own tables
(``runkernel.kernel.edges``) are proved equal to these declarations by the tests, and
every export enumerates them through ``spec_edges``.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen
from statemachine import State, StateMachine


class RunMachine(StateMachine):
    """Committed RunState: Running, Awaiting(ticket) or Ended(cause)."""

    Running = State(initial=True)
    Awaiting = State()
    Ended = State(final=True)

    commit_progress = Running.to(Running)
    commit_resume_ticket = Running.to(Awaiting)
    validated_resume_command = Awaiting.to(Running)
    commit_end_cause = Running.to(Ended)
    cancel_stop_or_failure = Awaiting.to(Ended)


class ToolCallMachine(StateMachine):
    """One durable tool call; Finalized is the batch publication barrier."""

    Requested = State(initial=True)
    Executing = State()
    Awaiting = State()
    Completed = State()
    Indeterminate = State()
    Finalized = State(final=True)

    first_attempt_committed = Requested.to(Executing)
    retry_under_fixed_policy = Executing.to(Executing)
    gate_or_external_input = Requested.to(Awaiting)
    delegation_or_scheduled_wait = Executing.to(Awaiting)
    matching_typed_resume = Awaiting.to(Executing)
    immediate_block_or_supplied_result = Requested.to(Completed)
    tool_output_committed = Executing.to(Completed)
    deny_or_externally_completed = Awaiting.to(Completed)
    run_ended_first = Requested.to(Indeterminate)
    outcome_cannot_be_determined_safely = Executing.to(Indeterminate)
    owning_run_ended = Awaiting.to(Indeterminate)
    every_call_terminal = Completed.to(Finalized) | Indeterminate.to(Finalized)


#: The event that creates each machine's initial state (the ``[*] -->`` edge).
INITIAL_EVENTS: dict[str, str] = {
    "RunMachine": "run_activation",
    "ToolCallMachine": "complete_batch_committed",
}

#: Whether the diagram draws ``final --> [*]`` for the machine.
DRAWS_TERMINUS: dict[str, bool] = {"RunMachine": True, "ToolCallMachine": False}


@frozen
class SpecEdge:
    """One enumerated transition. ``source``/``target`` None is the ``[*]``."""

    source: str | None
    target: str | None
    event: str | None


def state_names(machine: type[Any]) -> list[str]:
    """The machine's states in declaration order."""
    return [str(state.id) for state in machine.states]


def initial_state(machine: type[Any]) -> str:
    return next(str(s.id) for s in machine.states if s.initial)


def final_states(machine: type[Any]) -> list[str]:
    return [str(s.id) for s in machine.states if s.final]


def spec_edges(machine: type[Any]) -> list[SpecEdge]:
    """Every edge of ``machine``: the initial one, each declared transition, the terminus.

    python-statemachine's class attributes are typed loosely; this is the one place that
    reads them.
    """
    edges = [SpecEdge(None, initial_state(machine), INITIAL_EVENTS[machine.__name__])]
    for state in machine.states:
        for transition in state.transitions:
            for event in transition.events:
                edges.append(SpecEdge(str(transition.source.id), str(transition.target.id), str(event.id)))
    if DRAWS_TERMINUS[machine.__name__]:
        edges.extend(SpecEdge(name, None, None) for name in final_states(machine))
    return edges


MACHINES: tuple[type[Any], ...] = (RunMachine, ToolCallMachine)
