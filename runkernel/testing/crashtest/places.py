"""Where a call sits among the Runs of one play, and what it returned there, so two
plays (whose ids differ: a recovery that re-asks the model mints new ones) can be
compared call by call.

A Run is named by its key (``""``: the scenario's Run; a delegation's child: its parent
call's place, ``research[1.0]``, nested with ``/``); a call by its ``Place``: the Run's
key, the step, its index in the batch, the tool and the arguments as JSON.
"""

from __future__ import annotations

import json

import attrs

from runkernel.adapters.stores.contract import Store
from runkernel.kernel.state import CallCompleted, ThreadCommit
from runkernel.kernel.values import ResultKind, Role
from runkernel.testing.crashtest.watch import Played
from runkernel.testing.simulation.history import Outline

#: Where a call sits: (Run key, step, index in the batch, tool, arguments as JSON).
Place = tuple[str, int, int, str, str]
#: The Run key of the scenario's own Run.
TOP = ""

_RESULTS = frozenset({ResultKind.OUTPUT, ResultKind.ERROR})


def logs_of(store: Store, played: Played) -> dict[str, list[ThreadCommit]]:
    """Each Run's commits (of its Thread, its own only), by Run key, parents first."""
    runs = played.runs or {TOP: (played.thread_id, played.run_id)}
    return {key: [c for c in store.commits(thread_id) if c.run_id == run_id] for key, (thread_id, run_id) in runs.items()}


def places(logs: dict[str, list[ThreadCommit]]) -> dict[str, Place]:
    """Each operation id and call id of the play, with the place of its call."""
    found: dict[str, Place] = {}
    for key, log in logs.items():
        for commit in log:
            if commit.batch is None:
                continue
            for index, call in enumerate(commit.batch.calls):
                place = (key, commit.batch.step, index, call.tool, json.dumps(call.arguments, sort_keys=True))
                found[call.operation_id] = place
                found[call.call_id] = place
    return found


def result_values(logs: dict[str, list[ThreadCommit]], runs: dict[str, tuple[str, str]]) -> dict[Place, str]:
    """What each call that completed with its tool's output or error returned, as
    canonical JSON with the play's own ids (its Threads and Runs, the call's id and
    operation id) replaced by names, so the same value from another play compares equal.
    A concurrent delegation's value (its child's terminus) is left out: I15 judges it,
    and its child's calls are compared themselves."""
    names = {ids: f"<{kind} {key}>" for key, pair in runs.items() for kind, ids in zip(("thread", "run"), pair)}
    found: dict[Place, str] = {}
    for key, log in logs.items():
        for commit in log:
            batch = commit.batch
            if batch is None or not batch.finalized:
                continue
            for index, call in enumerate(batch.calls):
                status = call.status
                if not isinstance(status, CallCompleted) or status.result.kind not in _RESULTS or call.delegation:
                    continue
                text = json.dumps([status.result.kind.value, status.result.value], sort_keys=True)
                own = {**names, call.operation_id: "<operation>", call.call_id: "<call>"}
                for old in sorted(own, key=len, reverse=True):  # a run id holds its thread id
                    text = text.replace(old, own[old])
                found[(key, batch.step, index, call.tool, json.dumps(call.arguments, sort_keys=True))] = text
    return found


def first_difference(baseline: Outline, crashed: Outline) -> tuple[int, int]:
    """(step, index) of the first call whose tool, arguments or fate differ between two
    outlines: from there on a Run continues from other facts (I12), so values are not
    compared at or after it. ``(len + 1, 0)`` when none differs."""
    for step, (before, after) in enumerate(zip(baseline.steps, crashed.steps), start=1):
        for index, (old, new) in enumerate(zip(before, after)):
            if old != new:
                return step, index
        if len(before) != len(after):
            return step, min(len(before), len(after))
    return min(len(baseline.steps), len(crashed.steps)) + 1, 0


def masked(commit: ThreadCommit) -> ThreadCommit:
    """The commit as two crash-free plays must repeat it: without its messages'
    host-opaque ``metadata`` (the judge ignores it; a framework keeps timestamps there),
    and without tool result values (a value that differs between the two plays is simply
    not compared later: what the model does with it must repeat)."""
    messages = tuple(
        attrs.evolve(m, metadata=None, content=None if m.role is Role.TOOL else m.content) for m in commit.messages
    )
    batch = commit.batch
    if batch is not None:
        calls = tuple(
            attrs.evolve(c, status=attrs.evolve(c.status, result=attrs.evolve(c.status.result, value=None)))
            if isinstance(c.status, CallCompleted) and c.status.result.kind in _RESULTS and c.delegation is None
            else c
            for c in batch.calls
        )
        batch = attrs.evolve(batch, calls=calls)
    return attrs.evolve(commit, messages=messages, batch=batch)


__all__ = ["TOP", "Place", "first_difference", "logs_of", "masked", "places", "result_values"]
