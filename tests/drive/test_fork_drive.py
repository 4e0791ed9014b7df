"""Forks in a store, driven to their end (``runkernel.fork``), on the three stores.

A source Run is driven by a push-mode driver and dropped mid-batch (the host dies);
the Run is forked at its latest version and a fresh driver picks the fork up from the
store alone. The fork reruns a replay call found Executing under a new operation id
from attempt 1, never starts a call found Executing under indeterminate (refused, or
closed Indeterminate with ``abandon_open_calls``), waits on a new ticket for a waiting
call, and the source's commits are the same before and after. Every trace, the
source's and the fork's together, is legal under the checker (the fork's first line
matched against the source).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres_support import postgres_url  # noqa: F401 - a fixture
from runkernel import (
    Approve,
    CallRequest,
    Done,
    Driver,
    EndCauseKind,
    Hold,
    Infer,
    Permit,
    RunCall,
    ToolPolicy,
    WaitFor,
    WaitKind,
    fork,
)
from runkernel.adapters.drive.actions import Action
from runkernel.adapters.drive.ports import GateAnswer
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.errors import ForkRefused
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.state import CallIndeterminate, ToolCall
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import Boundary, CrashAtEncounters, CrashingStore, SimulatedCrash

KINDS = ["memory", "sqlite", "postgresql"]
TOOLS = {"search": ToolPolicy.replay(max_attempts=3), "send": ToolPolicy.indeterminate()}


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SqliteStore(tmp_path / "runs.db")
    else:
        from runkernel.adapters.stores.postgres import PostgresStore

        made = PostgresStore(request.getfixturevalue("postgres_url"))
    yield made
    made.close()


class HoldSends:
    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        return Hold(WaitKind.APPROVAL) if call.tool == "send" else Permit()


def _source(store: Store, *, until: str, gate: HoldSends | None = None) -> tuple[str, str, int, list[RunCall]]:
    """Drive a source Run (search, then send) until ``until`` ("search": search is
    Executing; "send": send is Executing or waiting) and drop its driver there."""
    driver = Driver(store, TOOLS, gate=gate) if gate is not None else Driver(store, TOOLS)
    action: Action = driver.start(["find and send"], thread_id="source")
    assert isinstance(action, Infer)
    action = driver.inferred("working", [CallRequest("search", {"q": "x"}), CallRequest("send", {"to": "me"})])
    started: list[RunCall] = []
    while True:
        if isinstance(action, RunCall):
            started.append(action)
            if action.tool == until:
                break
            action = driver.call_returned(action.call_id, {"found": 1})
        elif isinstance(action, WaitFor):
            break
        else:
            raise AssertionError(f"unexpected {action!r}")
    run_id = driver.run_id
    assert run_id is not None
    snapshot = store.run(run_id)
    assert snapshot is not None
    return "source", run_id, snapshot.version, started


def _drive_to_end(store: Store, run_id: str, *, approve: bool = False) -> list[RunCall]:
    """A fresh driver picks the Run up and drives it to its end; the calls it hands out."""
    driver = Driver(store, TOOLS, gate=HoldSends())
    action = driver.pick_up(run_id)
    started: list[RunCall] = []
    while not isinstance(action, Done):
        if isinstance(action, RunCall):
            started.append(action)
            action = driver.call_returned(action.call_id, {"ok": True})
        elif isinstance(action, Infer):
            action = driver.inferred("done", [], end=EndCauseKind.COMPLETED)
        elif isinstance(action, WaitFor) and approve:
            action = driver.resume(Approve())
        else:
            raise AssertionError(f"unexpected {action!r}")
    return started


def _lines(store: Store, thread_id: str) -> list[object]:
    return [commit_to_json(c) for c in store.commits(thread_id)]


def _legal_together(store: Store, *threads: str) -> None:
    commits = [c for thread in threads for c in store.commits(thread)]
    finding = check_commits(commits)
    assert finding.verdict is Verdict.LEGAL, finding


def test_a_replay_call_found_executing_reruns_in_the_fork_under_a_new_operation_id(store: Store) -> None:
    thread, run_id, at, started = _source(store, until="search")
    before = _lines(store, thread)
    made = fork(store, run_id, at=at, thread_id="fork-1")
    assert made.state == "running" and made.abandoned == ()
    ran = _drive_to_end(store, made.run_id, approve=True)
    assert [a.tool for a in ran] == ["search", "send"]
    assert ran[0].operation_id != started[0].operation_id and ran[0].attempt == 1
    assert _lines(store, thread) == before  # the source never changed
    _legal_together(store, thread, "fork-1")
    print(f"fork of a replay call: source op {started[0].operation_id}, fork op {ran[0].operation_id}")


def test_an_indeterminate_call_found_executing_refuses_the_fork_or_is_closed_and_never_started(store: Store) -> None:
    thread, run_id, at, started = _source(store, until="send")
    send = started[-1]
    before = _lines(store, thread)
    with pytest.raises(ForkRefused) as refused:
        fork(store, run_id, at=at, thread_id="fork-2")
    assert refused.value.calls == (send.call_id,) and send.call_id in str(refused.value)
    assert store.thread_head("fork-2") is None  # a refused fork writes nothing
    made = fork(store, run_id, at=at, thread_id="fork-2", abandon_open_calls=True)
    assert made.abandoned == (send.call_id,)
    assert made.commit.batch is not None
    closed = made.commit.batch.call(send.call_id)
    assert closed is not None and isinstance(closed.status, CallIndeterminate)
    ran = _drive_to_end(store, made.run_id)
    assert all(a.call_id != send.call_id for a in ran)  # the fork never starts it
    assert _lines(store, thread) == before
    _legal_together(store, thread, "fork-2")
    print(f"fork of an indeterminate call: refused naming {refused.value.calls}; abandoned, fork started {len(ran)} calls")


def test_a_waiting_call_starts_the_fork_awaiting_on_a_new_ticket(store: Store) -> None:
    thread, run_id, at, _ = _source(store, until="send", gate=HoldSends())
    source = store.run(run_id)
    assert source is not None and source.state.__class__.__name__ == "Awaiting"
    made = fork(store, run_id, at=at, thread_id="fork-3")
    assert made.state == "awaiting" and made.ticket_id is not None
    assert made.ticket_id != getattr(source.state, "ticket").ticket_id  # I14
    ran = _drive_to_end(store, made.run_id, approve=True)
    assert [a.tool for a in ran] == ["send"]
    _legal_together(store, thread, "fork-3")


def test_a_fork_at_a_version_that_is_not_the_runs_is_refused(store: Store) -> None:
    _, run_id, at, _ = _source(store, until="search")
    with pytest.raises(ForkRefused):
        fork(store, run_id, at=at + 1)
    fork(store, run_id, at=1, thread_id="fork-4")
    with pytest.raises(ForkRefused):
        fork(store, run_id, at=1, thread_id="fork-4")  # the Thread id is taken


def test_a_crash_before_or_after_the_forks_commit_leaves_nothing_or_all_of_it(store: Store) -> None:
    """The fork is one write: a writer that dies before it leaves no fork Thread, one
    that dies after it (before hearing back) leaves the whole fork, which a fresh driver
    drives to its end; the source is never changed either way."""
    thread, run_id, at, _ = _source(store, until="search")
    before = _lines(store, thread)
    figures: dict[str, int] = {"crashes": 0, "nothing": 0, "all": 0}
    for index in range(2):  # the fork's one write has two boundaries: before it, after it
        plan = CrashAtEncounters([index])
        crashing = CrashingStore(store, plan)
        new_thread = f"crash-{index}"
        with pytest.raises(SimulatedCrash):
            fork(crashing, run_id, at=at, thread_id=new_thread)
        figures["crashes"] += 1
        boundary = plan.fired[0][0]
        landed = list(store.commits(new_thread))
        if boundary is Boundary.BEFORE_WRITE:
            assert landed == [] and store.thread_head(new_thread) is None
            figures["nothing"] += 1
            continue
        assert len(landed) == 1 and landed[0].forked_from is not None
        figures["all"] += 1
        with pytest.raises(ForkRefused):  # the Thread is taken: a retry writes nothing twice
            fork(store, run_id, at=at, thread_id=new_thread)
        ran = _drive_to_end(store, landed[0].run_id, approve=True)
        assert [a.tool for a in ran] == ["search", "send"]
        _legal_together(store, thread, new_thread)
    assert _lines(store, thread) == before
    print(f"fork crash test: {figures['crashes']} crashes, {figures['nothing']} left nothing, {figures['all']} left all")
    assert figures == {"crashes": 2, "nothing": 1, "all": 1}


class _RivalBetween:
    """The store, but a rival takes the fork's Thread between the fork's check that it is
    free and its write (its first ``thread_head`` answer is stale)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stale = True

    def thread_head(self, thread_id: str) -> object:
        if self.stale:
            self.stale = False
            return None
        return self.store.thread_head(thread_id)

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


def test_a_rival_that_takes_the_thread_first_makes_the_same_refusal_and_nothing_is_written_twice(store: Store) -> None:
    _, run_id, at, _ = _source(store, until="search")
    fork(store, run_id, at=at, thread_id="taken")
    with pytest.raises(ForkRefused) as refused:
        fork(_RivalBetween(store), run_id, at=at, thread_id="taken")  # type: ignore[arg-type]
    assert "already has commits" in str(refused.value)
    assert len(list(store.commits("taken"))) == 1
