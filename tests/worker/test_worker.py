"""The worker and the lease hooks of both drivers (Workers and leases):
W1 (no executor start without a valid lease, the epoch handed to the tool), renewal
counts, W4 (a lost reply is adopted, never written twice), app ownership, discovery of
commands, deadlines and timers, and shutdown."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.actions import Action, CallRequest, Done, Infer, RunCall, WaitFor
from runkernel.adapters.drive.invocation import NoInvocation, current_invocation, invocation_scope
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    Hold,
    InferenceRequest,
    ModelReply,
    Permit,
    Returned,
    Scheduled,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.drive.runtime import CommitRetried, Runtime, RuntimeEvent
from runkernel.adapters.stores.contract import (
    Lease,
    LeaseHeld,
    LeaseLost,
    Settlement,
    StoreUnavailable,
    Writer,
)
from runkernel.adapters.worker.loop import LISTEN_SLICE, Worker
from runkernel.adapters.worker.apps import AppLoadError, PushApp, RuntimeApp, load_app
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import (
    Awaiting,
    CallCompleted,
    CallExecuting,
    Ended,
    Message,
    RunSnapshot,
    ThreadCommit,
    ToolCall,
)
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import ManualClock

REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY))
RECONNECT = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT))


class OneCall:
    """Step 1 calls ``tool``; step 2 answers and ends."""

    def __init__(self, tool: str = "work") -> None:
        self.tool = tool

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("working", (CallRequest(self.tool, {"n": 1}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Recording:
    """A tool that keeps every start it saw, with its fencing token and what
    ``current_invocation()`` said inside it."""

    def __init__(self, policy: ToolPolicy = REPLAY, during: object = None) -> None:
        self.policy = policy
        self.starts: list[RunCall] = []
        self.seen_inside: list[RunCall] = []
        self.during = during

    def run(self, invocation: RunCall) -> ToolReply:
        self.starts.append(invocation)
        self.seen_inside.append(current_invocation())
        if callable(self.during):
            self.during()
        return Returned({"ok": True})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


def _activate(store: MemoryStore | SqliteStore, run_id: str, app: str | None = "test", thread: str | None = None) -> None:
    from runkernel.testing import step
    from runkernel.kernel.protocol import Activate

    decision = step(None, Activate(thread or f"t-{run_id}", run_id, 0, (Message(Role.USER, "go"),), app))
    assert decision.commit is not None
    store.append(decision.commit)


def _app(tool: Recording, gate: object = None) -> RuntimeApp:
    return RuntimeApp("test", OneCall(), ToolRegistry({"work": tool}), gate=gate)  # type: ignore[arg-type]


# --- W1 and the fencing token --------------------------------------------------------


def test_a_worker_hands_the_tool_its_lease_epoch_and_the_current_invocation() -> None:
    store = MemoryStore()
    _activate(store, "r1")
    tool = Recording()
    report = Worker(store, _app(tool), worker_id="w1").run_once()
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Ended)
    (start,) = tool.starts
    assert start.lease_epoch == 1 and tool.seen_inside == [start]
    assert report.drives == 1 and report.commits == 4
    assert store.current_lease("r1") is None, "a quiet Run's lease is released"
    versions = range(2, snapshot.version + 1)
    assert {store.writer_of("t-r1", v) for v in versions} == {Writer("w1", 1)}
    with pytest.raises(NoInvocation):
        current_invocation()


def test_invocation_scope_is_the_test_helper_for_calling_a_tool_directly() -> None:
    invocation = RunCall("r1", "c1", "work", {"n": 1}, "op1", 1, lease_epoch=7)
    with invocation_scope(invocation):
        assert current_invocation() is invocation
    with pytest.raises(NoInvocation):
        current_invocation()


def test_a_stalled_worker_whose_lease_expired_starts_no_executor() -> None:
    clock = ManualClock(1000.0)
    store = MemoryStore(clock=clock)
    _activate(store, "r1")
    tool = Recording()
    keeper = LeaseKeeper(store, "stalled", duration=10, monotonic=clock)
    runtime = Runtime(store, OneCall(), ToolRegistry({"work": tool}), leases=keeper)
    drive = runtime.begin_drive("r1")
    # drive until the next effect is the executor start (Executing{1} is durable)
    while True:
        snapshot = store.run("r1")
        assert snapshot is not None
        batch = snapshot.open_batch
        if batch is not None and isinstance(batch.calls[0].status, CallExecuting):
            break
        assert not drive.step()
    clock.now += 11  # the worker was stopped past its lease
    store.acquire_lease("r1", "rescuer", 10)
    with pytest.raises(LeaseLost):
        drive.run()
    assert tool.starts == [], "the stalled worker started the executor after losing its lease"


def test_an_executor_does_not_start_inside_the_safety_margin() -> None:
    clock = ManualClock(1000.0)
    store = MemoryStore(clock=clock)
    _activate(store, "r1")
    keeper = LeaseKeeper(store, "w1", duration=10, margin=3, renew_after=100, monotonic=clock)
    lease = keeper.take("r1")
    clock.now += 7.5  # 2.5 s left: less than the margin, and no renewal is due yet
    with pytest.raises(LeaseLost):
        keeper.before_executor("r1")
    assert keeper.held("r1") is None
    assert store.current_lease("r1") == lease, "the check itself changes nothing"


def test_renewal_happens_at_most_once_per_renewal_interval_never_per_commit() -> None:
    clock = ManualClock(1000.0)
    store = MemoryStore(clock=clock)
    keeper = LeaseKeeper(store, "w1", duration=10, monotonic=clock)
    keeper.take("r1")
    for _ in range(100):
        keeper.for_commit("r1")
    assert keeper.renewals == 0
    for _ in range(40):
        clock.now += 1
        keeper.for_commit("r1")
    # 40 s of store time at a renewal interval of 5 s
    assert keeper.renewals <= 40 // 5
    assert store.current_lease("r1") is not None
    print(f"renewals: 0 for 100 commits at once; {keeper.renewals} over 40 s of commits, 1 s apart")


# --- W4: the write lands, the reply is lost ------------------------------------------


class _LosesReplies:
    """An append that lands and then reports failure, as a connection that drops after
    COMMIT does: ``lose`` names the appends (1-based) whose reply is lost."""

    lose: set[int]
    appends: list[int]  # one count, shared with reopened twins

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        self.appends[0] += 1
        stored: RunSnapshot = super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)  # type: ignore[misc]
        if self.appends[0] in self.lose:
            raise StoreUnavailable("connection dropped after COMMIT (injected)")
        return stored


class LosesReplies(_LosesReplies, MemoryStore):
    """A memory store whose replies ``lose`` names are lost after the append lands."""

    def __init__(self, lose: set[int]) -> None:
        super().__init__()
        self.lose = lose
        self.appends = [0]


class SqliteLosesReplies(_LosesReplies, SqliteStore):
    """The same on a SQLite file: the transaction commits, then the reply is lost. Its
    reopened twins (a worker's slots) count appends with it."""

    def __init__(self, path: Path | str, lose: set[int]) -> None:
        super().__init__(path)
        self.lose = lose
        self.appends = [0]

    def reopen(self) -> SqliteLosesReplies:
        twin = SqliteLosesReplies(self.path, self.lose)
        twin.appends = self.appends
        return twin


@pytest.mark.parametrize("concurrency", [1, 3])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("lost", [2, 3, 4, 5])
def test_a_commit_whose_reply_was_lost_is_adopted_on_retry_never_written_twice(
    lost: int, kind: str, concurrency: int, tmp_path: Path
) -> None:
    store: MemoryStore | SqliteStore = (
        LosesReplies({lost}) if kind == "memory" else SqliteLosesReplies(tmp_path / "s.db", {lost})
    )
    _activate(store, "r1")
    tool = Recording()
    retried: list[RuntimeEvent] = []
    worker = Worker(
        store,
        _app(tool),
        worker_id="w1",
        on_event=lambda e: retried.append(e) if isinstance(e, CommitRetried) else None,
        concurrency=concurrency,
    )
    report = worker.run_once()
    # adopted in the same drive: no conflict, no second pick-up
    assert (report.conflicts, report.drives, len(retried)) == (0, 1, 1)
    commits = list(store.commits("t-r1"))
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Ended)
    assert [c.version for c in commits] == list(range(1, len(commits) + 1))
    assert len(commits) == 5, "a retried commit was written twice, or one is missing"
    assert len(tool.starts) == 1
    assert check_commits(commits).verdict is Verdict.LEGAL
    print(f"reply of append {lost} lost, {concurrency} slot(s): {len(commits)} commits, 1 executor start")


# --- apps, discovery ---------------------------------------------------------------


def test_a_worker_drives_only_its_apps_runs() -> None:
    store = MemoryStore()
    _activate(store, "mine", app="test")
    _activate(store, "theirs", app="billing")
    _activate(store, "nobodys", app=None)
    Worker(store, _app(Recording()), worker_id="w1").run_once()
    states = {r: type(s.state).__name__ for r in ("mine", "theirs", "nobodys") if (s := store.run(r))}
    assert states == {"mine": "Ended", "theirs": "Running", "nobodys": "Running"}


def test_a_held_run_is_left_to_its_worker() -> None:
    store = MemoryStore()
    _activate(store, "r1")
    store.acquire_lease("r1", "someone-else", 600)
    tool = Recording()
    report = Worker(store, _app(tool), worker_id="w1").run_once()
    assert tool.starts == [] and report.drives == 0
    snapshot = store.run("r1")
    assert snapshot is not None and snapshot.version == 1


class HoldFor:
    def __init__(self, answer: Hold) -> None:
        self.answer = answer

    def check(self, run_id: str, call: ToolCall) -> Hold | Permit:
        return self.answer


def test_a_worker_applies_a_queued_approval_then_an_expired_deadline() -> None:
    from runkernel.adapters.drive.inbox import submit_resume
    from runkernel.kernel.protocol import Approve, ResumeCommand

    store = MemoryStore()
    _activate(store, "r1")
    _activate(store, "r2")
    tool = Recording()
    worker = Worker(store, _app(tool, HoldFor(Hold(WaitKind.APPROVAL, None, expires_at="2000-01-01T00:00:00Z"))))
    approvals = Worker(store, _app(tool, HoldFor(Hold(WaitKind.APPROVAL))), worker_id="w2")
    approvals.drive("r1")
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Awaiting)
    assert store.runs_with_work("test") == ["r2"]
    queued = submit_resume(store, ResumeCommand("r1", snapshot.state.ticket.ticket_id, WaitKind.APPROVAL, Approve()))
    assert isinstance(queued, int)
    worker.drive("r2")  # its approval has a deadline in the past: denied by expiry at once
    assert store.runs_with_work("test") == ["r1"]
    worker.run_once()
    for run_id in ("r1", "r2"):
        done = store.run(run_id)
        assert done is not None and isinstance(done.state, Ended)
    entry = store.inbox_entry(queued)
    assert entry is not None and entry.outcome == "applied"
    assert len(tool.starts) == 1, "only the approved call ran"


class Later:
    """A tool that asks to run again later, once, then returns."""

    policy = REPLAY

    def __init__(self) -> None:
        self.runs = 0

    def run(self, invocation: RunCall) -> ToolReply:
        self.runs += 1
        return Scheduled("2000-01-01T00:00:00Z") if self.runs == 1 else Returned("again")

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


def test_a_due_timer_is_fired_by_the_worker() -> None:
    store = MemoryStore()
    _activate(store, "r1")
    tool = Later()
    app = RuntimeApp("test", OneCall(), ToolRegistry({"work": tool}))
    Worker(store, app, worker_id="w1").run_once()
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Ended), snapshot
    assert tool.runs == 2


# --- shutdown -----------------------------------------------------------------------


def test_shutdown_finishes_the_commit_in_flight_starts_nothing_new_and_releases() -> None:
    store = MemoryStore()
    _activate(store, "r1")
    _activate(store, "r2")
    worker: Worker
    tool = Recording(during=lambda: worker.shutdown())
    worker = Worker(store, _app(tool), worker_id="w1", concurrency=1)  # one in flight (test_slots: several)
    worker.run_once()
    assert len(tool.starts) == 1, "a new executor started after shutdown"
    first = store.run("r1")
    assert first is not None and first.batch is not None
    assert isinstance(first.batch.calls[0].status, CallCompleted), "the tool's result was dropped"
    second = store.run("r2")
    assert second is not None and second.version == 1
    assert store.current_lease("r1") is None and store.current_lease("r2") is None
    # the next worker carries on from committed facts
    Worker(store, _app(Recording()), worker_id="w2").run_once()
    assert all(isinstance(s.state, Ended) for r in ("r1", "r2") if (s := store.run(r)))


# --- the push-mode driver under leases -----------------------------------------------


def test_the_push_driver_leases_the_run_and_hands_the_epoch_with_run_call() -> None:
    store = MemoryStore()
    keeper = LeaseKeeper(store, "host-1", duration=60)
    driver = Driver(store, {"work": REPLAY}, leases=keeper, app="test")
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("working", [CallRequest("work", {"n": 1})])
    assert isinstance(action, RunCall) and action.lease_epoch == 1
    rival = Driver(store, {"work": REPLAY}, leases=LeaseKeeper(store, "host-2", duration=60))
    with pytest.raises(LeaseHeld):
        rival.pick_up("r1")
    action = driver.call_returned(action.call_id, "ok")
    action = driver.inferred("done", end=EndCauseKind.COMPLETED)
    assert isinstance(action, Done)
    commits = list(store.commits("t1"))
    assert commits[0].app == "test"
    assert {store.writer_of("t1", c.version) for c in commits} == {Writer("host-1", 1)}


class PushHost:
    """A push-mode worker app: answers every RunCall itself."""

    name = "push"
    tools: Mapping[str, ToolPolicy] = {"work": REPLAY}

    def __init__(self) -> None:
        self.epochs: list[int | None] = []

    def serve(self, driver: Driver, action: Action) -> None:
        while not isinstance(action, (WaitFor, Done)):
            if isinstance(action, Infer):
                if action.step == 1:
                    action = driver.inferred("working", [CallRequest("work", {"n": 1})])
                else:
                    action = driver.inferred("done", end=EndCauseKind.COMPLETED)
            elif isinstance(action, RunCall):
                self.epochs.append(action.lease_epoch)
                action = driver.call_returned(action.call_id, "ok")
            else:
                raise AssertionError(f"unexpected {action!r}")


def test_a_worker_hands_a_push_host_a_leased_driver() -> None:
    store = MemoryStore()
    _activate(store, "r1", app="push")
    host = PushHost()
    assert isinstance(host, PushApp)
    Worker(store, host, worker_id="w1").run_once()
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Ended)
    assert host.epochs == [1]
    assert store.current_lease("r1") is None


# --- loading an app -------------------------------------------------------------------


def test_load_app_finds_module_attr_like_uvicorn_and_says_what_is_wrong() -> None:
    app = load_app("examples.demo_app:app")
    assert isinstance(app, RuntimeApp) and app.name == "demo"
    for bad, why in [
        ("examples.demo_app", "MODULE:ATTR"),
        ("examples.nope:app", "cannot import"),
        ("examples.demo_app:nope", "no attribute"),
        ("examples.demo_app:APP_NAME", "not a worker app"),
    ]:
        with pytest.raises(AppLoadError, match=why):
            load_app(bad)


# --- one outcome for a refused command, whichever driver applies it -------------------


class SettlementLog(MemoryStore):
    """Keeps every settlement made outside a commit (what a refusal is)."""

    def __init__(self) -> None:
        super().__init__()
        self.settled: list[tuple[int, str]] = []

    def settle_command(self, entry_id: int, outcome: str) -> None:
        self.settled.append((entry_id, outcome))
        super().settle_command(entry_id, outcome)


@pytest.mark.parametrize("driver", ["pull", "push"])
def test_both_drivers_settle_a_duplicate_command_with_the_same_outcome(driver: str) -> None:
    from runkernel.adapters.drive.inbox import submit_resume
    from runkernel.adapters.stores.contract import InboxEntry
    from runkernel.adapters.stores.serial import resume_to_inbox
    from runkernel.kernel.protocol import Approve, ResumeCommand

    store = SettlementLog()
    _activate(store, "r1")
    Worker(store, _app(Recording(), HoldFor(Hold(WaitKind.APPROVAL))), worker_id="w0").run_once()
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Awaiting)
    approve = ResumeCommand("r1", snapshot.state.ticket.ticket_id, WaitKind.APPROVAL, Approve())
    first = submit_resume(store, approve)
    assert isinstance(first, int) and submit_resume(store, approve) == first, "a wait takes one answer"
    # a duplicate only a store without the one-answer key could hold (one made before
    # it, before ``db migrate``): the drivers still settle it alike
    with store._lock:
        second = next(store._ids)
        store._inbox[second] = InboxEntry(second, "r1", resume_to_inbox(approve), "pending")
        store._pending.setdefault("r1", {})[second] = None
    if driver == "pull":
        Worker(store, _app(Recording()), worker_id="w1").run_once()
    else:
        push = Driver(store, {"work": REPLAY})
        action = push.pick_up("r1")  # applies the inbox first
        assert isinstance(action, RunCall)
        action = push.call_returned(action.call_id, "ok")
        assert isinstance(action, Infer)
        assert isinstance(push.inferred("done", end=EndCauseKind.COMPLETED), Done)
    entry = store.inbox_entry(first)
    assert entry is not None and entry.outcome == "applied"
    # an Ended Run keeps only applied commands; the refusal was settled before that
    assert store.settled == [(second, f"refused: already applied by command {first}")]


def test_the_push_driver_fires_a_due_timer_like_the_runtime() -> None:
    store = MemoryStore()
    driver = Driver(store, {"work": REPLAY})
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("working", [CallRequest("work", {"n": 1})])
    assert isinstance(action, RunCall) and action.attempt == 1
    action = driver.call_scheduled(action.call_id, "2000-01-01T00:00:00Z")
    # the timer is already due: the driver resumes the call instead of waiting
    assert isinstance(action, RunCall), action
    action = driver.call_returned(action.call_id, "again")
    assert isinstance(action, Infer)
    events = [e.type for c in store.commits("t1") for e in c.events]
    assert "resumed" in events


def test_a_polling_worker_waits_on_the_stores_wake_ups_when_it_has_them() -> None:
    class Notifying(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.waits: list[float] = []
            self.worker: Worker | None = None

        def wait_for_work(self, timeout: float) -> list[str]:
            self.waits.append(timeout)
            if len(self.waits) == 2:
                _activate(self, "late")  # a Run arrives while the worker waits: notified
                return ["late"]
            if len(self.waits) == 3 and self.worker is not None:
                self.worker.shutdown()
            return []

    store = Notifying()
    _activate(store, "r1")
    worker = Worker(store, _app(Recording()), worker_id="w1", poll_interval=7.0)
    store.worker = worker
    worker.run()
    # it listens before its first poll, then waits in slices (a shutdown is seen within
    # one): the notification ends its wait at once, and so does the shutdown
    assert store.waits == [0.0, LISTEN_SLICE, LISTEN_SLICE]
    assert all(isinstance(s.state, Ended) for r in ("r1", "late") if (s := store.run(r)))
