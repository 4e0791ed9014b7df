"""Child Runs under a worker, and waking the quiet parent (Step and ToolBatch:
the quiet parent; Workers and leases: work discovery), in process: a worker drives an
app whose tool is a terminal-only delegation. The children are activated with the
parent's app and found as work; the parent, quiet while they run, is not driven until
one ends, then ends with their termini; a parent whose children were never activated
(a crash after its Executing commits) is found and activates them itself; on
PostgreSQL a child's end wakes its parent's workers through LISTEN/NOTIFY."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from delegating_app import NAME, Counted, make_app
from postgres_support import postgres_url
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import GateAnswer, Hold, Permit
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.work import awaited_children
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.conformance import append_all
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.protocol import Approve, ResumeCommand
from runkernel.kernel.state import Awaiting, CallCompleted, Ended, Message, RunSnapshot, ToolCall
from runkernel.kernel.values import Role, WaitKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import activate, delegating_run


__all__ = ["postgres_url"]


class HoldSlow:
    """Holds every ``slow`` call (only children make them) for approval, so the children
    stay open while the test looks at their parent."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        return Hold(WaitKind.APPROVAL) if call.tool == "slow" else Permit()


class CountingWorker(Worker):
    """A worker that remembers which Run each drive was for."""

    def __init__(self, store: Store, app: RuntimeApp) -> None:
        # one slot: its drives are this instance's (each slot drives with a Worker of its own)
        super().__init__(store, app, worker_id="w1", poll_interval=0.0, concurrency=1)
        self.drives_of: Counter[str] = Counter()

    def drive(self, run_id: str) -> None:
        self.drives_of[run_id] += 1
        super().drive(run_id)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "wake.db")
    yield made
    made.close()


def _start(store: Store, run_id: str = "parent") -> None:
    decision = activate("tp", run_id, app=NAME)
    assert decision.commit is not None
    store.append(decision.commit)


def _children(store: Store, run_id: str = "parent") -> list[str]:
    snapshot = store.run(run_id)
    assert snapshot is not None and snapshot.batch is not None
    return [c.delegation.run_id for c in snapshot.batch.calls if c.delegation is not None]


def _snapshot(store: Store, run_id: str) -> RunSnapshot:
    found = store.run(run_id)
    assert found is not None
    return found


def _approve(store: Store, run_id: str) -> None:
    state = _snapshot(store, run_id).state
    assert isinstance(state, Awaiting)
    submitted = submit_resume(store, ResumeCommand(run_id, state.ticket.ticket_id, WaitKind.APPROVAL, Approve()))
    assert isinstance(submitted, int), submitted


def _ends_with_the_childrens_termini(store: Store, children: list[str]) -> None:
    """The parent Ended; each delegation's result is its child's committed terminus."""
    assert isinstance(_snapshot(store, "parent").state, Ended)
    finalized = [c.batch for c in store.commits("tp") if c.batch is not None and c.batch.finalized]
    assert len(finalized) == 1
    for call, child_id in zip(finalized[0].calls[:2], children, strict=True):
        child = _snapshot(store, child_id)
        assert isinstance(child.state, Ended) and isinstance(call.status, CallCompleted)
        finals = [m.content for m in store.messages(child.thread_id) if m.role is Role.ASSISTANT]
        assert call.status.result.value == {
            "thread_id": child.thread_id,
            "run_id": child_id,
            "cause": {"kind": child.state.cause.kind.value},
            "final": finals[-1],
        }
    tool_results = [m.call_id for m in store.messages("tp") if m.role is Role.TOOL]
    assert tool_results == ["d1", "d2", "o3"]


def _judged_together(store: Store) -> None:
    lines = [json.dumps(commit_to_json(c)).encode() for t in store.thread_ids() for c in store.commits(t)]
    finding = check_lines(lines)
    assert finding.verdict is Verdict.LEGAL, finding.report("store")


def test_a_quiet_parent_is_not_driven_while_its_children_run_and_is_woken_by_each_end(store: Store) -> None:
    app = make_app(gate=HoldSlow())
    _start(store)
    worker = CountingWorker(store, app)
    worker.run_once()
    children = _children(store)
    assert all(isinstance(_snapshot(store, c).state, Awaiting) for c in children)  # held open
    assert awaited_children(_snapshot(store, "parent")) == tuple(children)  # quiet
    polls_while_quiet = 5
    for _ in range(polls_while_quiet):
        assert store.runs_with_work(NAME) == []
        worker.run_once()
    assert worker.drives_of == Counter({"parent": 1, children[0]: 1, children[1]: 1})
    assert store.current_lease("parent") is None and all(store.current_lease(c) is None for c in children)
    _approve(store, children[1])
    worker.run_once()  # the second child ends, which wakes the parent: d2 completes
    assert worker.drives_of["parent"] == 2 and isinstance(_snapshot(store, children[1]).state, Ended)
    assert awaited_children(_snapshot(store, "parent")) == (children[0],)  # quiet again
    _approve(store, children[0])
    worker.run_once()
    _ends_with_the_childrens_termini(store, children)
    assert worker.drives_of == Counter({"parent": 3, children[0]: 2, children[1]: 2})
    fetch = app.tools.get("fetch")
    assert isinstance(fetch, Counted) and len(fetch.starts) == 1  # the ordinary call ran once, after the group
    _judged_together(store)
    print(
        f"\nquiet parent under a worker ({type(store).__name__}): runs 3, polls while quiet {polls_while_quiet}, "
        f"drives {dict(worker.drives_of)}, commits {worker.report.commits}, lost 0, duplicated 0"
    )


def test_a_parent_whose_children_were_never_activated_is_found_and_activates_them(store: Store) -> None:
    run = delegating_run("tp", "parent", app=NAME)
    append_all(store, [*run.opened, run.quiet])  # a crash before either child's activation
    assert store.runs_with_work(NAME) == ["parent"]
    worker = CountingWorker(store, make_app())
    worker.run_once()
    children = list(run.children)
    _ends_with_the_childrens_termini(store, children)
    activations = [c for child in children for c in store.commits(_snapshot(store, child).thread_id) if c.parent]
    assert [c.parent for c in activations] == list(run.parents)  # each child activated once
    assert [store.parent_of(child) for child in children] == list(run.parents)
    _judged_together(store)
    print(f"\nnever-activated children found by their parent: drives {dict(worker.drives_of)}")


def test_a_child_activated_under_a_runtime_carries_the_parents_app() -> None:
    store = MemoryStore()
    app = make_app(gate=HoldSlow())
    runtime = Runtime(store, app.model, app.tools, gate=app.gate, app=NAME)
    runtime.start("tp", "parent", (Message(Role.USER, "go"),))
    children = _children(store)
    assert {s.run_id: s.app for s in store.list_runs()} == {"parent": NAME, children[0]: NAME, children[1]: NAME}
    assert store.runs_with_work(NAME) == children  # the parent is quiet


def test_on_postgres_a_childs_end_wakes_the_workers_of_its_parent(postgres_url: str) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    worker = PostgresStore(postgres_url)
    client = PostgresStore(postgres_url)
    run = delegating_run("tp", "parent", app=NAME)
    append_all(client, [*run.opened, run.quiet, *run.activations])
    assert worker.wait_for_work(0) == []  # starts listening
    client.append(run.child_ends[1])
    assert worker.wait_for_work(60) == ["parent"]  # the parent, not the child, has work (60 s: a hang guard)
    assert worker.runs_with_work(NAME) == ["parent", run.children[0]]
    worker.close()
    client.close()
