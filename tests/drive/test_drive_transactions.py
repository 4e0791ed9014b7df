"""A drive costs at most its commits + 1 durable transactions (Cost model): the lease is
taken in one transaction and released in the commit that makes the Run quiet, on
SQLite and on PostgreSQL, counted at the store (SQLite's connections, PostgreSQL's WAL)
and never guessed. The Run is the worker bench's: two tool calls asked for at once,
then an answer. And while one worker has a step's inference in flight under its lease,
no other worker asks the model for that step.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench import subject
from runkernel import Approve, Hold, InferenceRequest, ModelReply, Permit, Worker, WaitKind
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.protocol import ResumeCommand
from runkernel.kernel.state import Awaiting, Ended, ToolCall
from durable_counts import DurableCount, PostgresCount, sqlite_count
from postgres_support import dsn, postgres_url  # noqa: F401 - a fixture

KINDS = ["sqlite", "postgresql"]


@contextmanager
def counted_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Store, DurableCount]]:
    """A new store of ``kind`` and the counter of its durable transactions."""
    if kind == "sqlite":
        with sqlite_count() as count:
            yield SqliteStore(tmp_path / "runs.db"), count
        return
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.postgres.schema import split_url

    url: str = request.getfixturevalue("postgres_url")
    _, schema = split_url(url)
    store = PostgresStore(url)
    counter = PostgresCount(dsn(), schema)
    try:
        yield store, counter
    finally:
        counter.close()
        store.close()


def _commits(store: Store, run_id: str) -> int:
    snapshot = store.run(run_id)
    return 0 if snapshot is None else snapshot.version


@pytest.mark.parametrize("kind", KINDS)
def test_a_drive_costs_its_commits_plus_one_durable_transaction(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with counted_store(kind, tmp_path, request) as (store, count):
        run_ids = subject.start_runs(store, "tx", 3, "tx-app")
        worker = Worker(store, subject.two_call_app("tx-app", lambda: None), worker_id="w1")
        figures = []
        for run_id in run_ids:
            before, commits_before = count.transactions(), _commits(store, run_id)
            worker.drive(run_id)
            transactions, commits = count.transactions() - before, _commits(store, run_id) - commits_before
            figures.append((commits, transactions))
            snapshot = store.run(run_id)
            assert snapshot is not None and isinstance(snapshot.state, Ended)
            assert store.current_lease(run_id) is None, "the quiet commit released the lease"
            assert store.lease_status(run_id).released
        print(f"{kind}: (commits, durable transactions) per drive: {figures}")
        # the lease take, then each commit; the last commit releases the lease
        assert all(commits >= 5 and transactions == commits + 1 for commits, transactions in figures)
        assert worker.leases.released_in_commits == 3


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_that_waits_costs_commits_plus_one_per_drive_on_each_side_of_the_wait(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with counted_store(kind, tmp_path, request) as (store, count):
        (run_id,) = subject.start_runs(store, "wait", 1, "wait-app")
        bench_app = subject.two_call_app("wait-app", lambda: None)

        app = RuntimeApp("wait-app", bench_app.model, bench_app.tools, gate=_HoldsTheFirstCall())
        worker = Worker(store, app, worker_id="w1")
        before, commits_before = count.transactions(), _commits(store, run_id)
        worker.drive(run_id)
        waiting = store.run(run_id)
        assert waiting is not None and isinstance(waiting.state, Awaiting)
        first = (_commits(store, run_id) - commits_before, count.transactions() - before)
        assert store.current_lease(run_id) is None, "the Awaiting commit released the lease"
        queued = submit_resume(store, ResumeCommand(run_id, waiting.state.ticket.ticket_id, WaitKind.APPROVAL, Approve()))
        assert isinstance(queued, int)
        before, commits_before = count.transactions(), _commits(store, run_id)
        worker.drive(run_id)
        done = store.run(run_id)
        assert done is not None and isinstance(done.state, Ended)
        second = (_commits(store, run_id) - commits_before, count.transactions() - before)
        print(f"{kind}: (commits, durable transactions) before the wait {first}, after it {second}")
        for commits, transactions in (first, second):
            assert commits >= 1 and transactions == commits + 1


class _HoldsTheFirstCall:
    """A gate that makes the first call it is asked about wait for an approval."""

    def __init__(self) -> None:
        self.first: str | None = None

    def check(self, run_id: str, call: ToolCall) -> Hold | Permit:
        if self.first is None:
            self.first = call.call_id
        return Hold(WaitKind.APPROVAL) if call.call_id == self.first else Permit()


# --- no second inference for a step in flight --------------------------------------


class _HeldInference:
    """A model whose first answer waits, inside ``infer``, until the test lets it go:
    while it waits, its worker has that step's inference in flight under its lease."""

    def __init__(self, model: object) -> None:
        self.model = model
        self.in_flight = threading.Event()
        self.go = threading.Event()
        self.asked: list[int] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.asked.append(request.step)
        if len(self.asked) == 1:
            self.in_flight.set()
            assert self.go.wait(60), "the test never let the inference go"
        reply: ModelReply = self.model.infer(request)  # type: ignore[attr-defined]
        return reply


def _open(kind: str, tmp_path: Path, url: str | None) -> Store:
    if kind == "sqlite":
        return SqliteStore(tmp_path / "runs.db")
    from runkernel.adapters.stores.postgres import PostgresStore

    assert url is not None
    return PostgresStore(url)


@pytest.mark.parametrize("kind", KINDS)
def test_no_worker_asks_the_model_for_a_step_another_has_in_flight_under_a_valid_lease(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = None if kind == "sqlite" else request.getfixturevalue("postgres_url")
    second_store = _open(kind, tmp_path, url)
    (run_id,) = subject.start_runs(second_store, "race", 1, "race-app")
    bench_app = subject.two_call_app("race-app", lambda: None)
    held, rival = _HeldInference(bench_app.model), _HeldInference(bench_app.model)
    rival.go.set()
    second = Worker(second_store, RuntimeApp("race-app", rival, bench_app.tools), worker_id="w2", lease_duration=600)
    failed: list[BaseException] = []

    def drive_first() -> None:
        # a store of its own, opened in its own thread, as another process would
        store = _open(kind, tmp_path, url)
        first = Worker(store, RuntimeApp("race-app", held, bench_app.tools), worker_id="w1", lease_duration=600)
        first.drive(run_id)
        if first.report.failures or first.report.contended:
            failed.append(AssertionError(f"w1's drive did not go through: {first.report}"))
        store.close()

    driving = threading.Thread(target=drive_first)
    driving.start()
    try:
        assert held.in_flight.wait(60), "the first worker never asked the model"
        # the race, forced: the step's inference is in flight in w1 while w2 looks for
        # work and then tries to drive the Run itself
        lease = second_store.current_lease(run_id)
        assert lease is not None and lease.worker_id == "w1"
        polled = second.run_once().drives
        second.drive(run_id)
    finally:
        held.go.set()
        driving.join(60)
    print(
        f"{kind}: w2's poll drove {polled} Run(s); w2 tried {second.report.drives} drive(s), was refused {second.report.contended} time(s), "
        f"asked the model {len(rival.asked)} time(s); w1 asked it for steps {held.asked}"
    )
    # whether the poll lists the Run or not, taking its lease is refused: never asked
    assert second.report.commits == 0 and second.report.contended == polled + 1
    assert rival.asked == []
    assert held.asked == [1, 2]
    assert not failed, failed
    done = second_store.run(run_id)
    assert done is not None and isinstance(done.state, Ended)
    second_store.close()


class _ListedBefore(SqliteStore):
    """A store whose poll answers what it would have answered before ``ended`` ended:
    another worker ended that Run between this worker's poll and its drive."""

    ended = ""

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        return [self.ended, *super().runs_with_work(app, limit, version=version)]


def test_a_stale_listing_of_a_run_another_worker_ended_costs_no_transaction(tmp_path: Path) -> None:
    with sqlite_count() as count:
        store = _ListedBefore(tmp_path / "runs.db")
        ended, waiting = subject.start_runs(store, "stale", 2, "stale-app")
        app = subject.two_call_app("stale-app", lambda: None)
        Worker(store, app, worker_id="w1").drive(ended)
        epoch = store.lease_status(ended).lease
        store.ended = ended
        before = count.transactions()
        late = Worker(store, app, worker_id="w2")
        late.run_once()
        transactions = count.transactions() - before
        print(f"w2's pass listed 2 Runs, 1 already ended: {late.report.drives} drive(s), {transactions} transactions")
        assert late.report.drives == 1, "the ended Run is not driven again"
        assert store.lease_status(ended).lease == epoch, "nor is its lease taken"
        done = store.run(waiting)
        assert done is not None and isinstance(done.state, Ended)
        # the other Run's commits (all but its activation) + its lease, and the worker's
        # registration and leaving (``presence``: once per pass, not per Run)
        assert transactions == done.version - 1 + 1 + 2
