"""Transient model errors, decided in the one interpreter (Public API): a model
call that raises commits nothing; a transient error under the attempt budget is the same
``Infer`` again after a capped exponential backoff, the Run still Running; a
non-transient error, or the last attempt's, ends the Run ``failed`` with the error. In
pull mode (``Runtime``, and under the worker, which sets the Run aside with its lease
kept and renewed and drives others meanwhile) and in both push shells; memory and
SQLite; every wait read from an injected clock, never slept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runkernel.adapters.drive.actions import CallRequest, Done, HostProtocolError, Infer, WaitFor
from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.model_errors import model_backoff, transient_model_error
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Staging, ToolRegistry, ToolReply
from runkernel.adapters.drive.runtime import Acknowledged, ModelFailed, Runtime, RuntimeEvent
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Checkpoint, LeaseHeld, Store
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.conformance.runs import step as activation_step
from runkernel.kernel.protocol import Activate, EndRequest
from runkernel.kernel.state import Ended, EndCause, Message, Running, TypedError
from runkernel.kernel.values import EndCauseKind, JsonValue, Role
from push_host import SHELLS, make_shell


class Overloaded(Exception):
    """What a model SDK raises on a rate limit or an overloaded server."""

    status_code = 429


class Clock:
    """The store's clock and the worker's monotonic clock: they move when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FlakyModel:
    """Raises ``errors[run_id]`` (or ``errors[(run_id, step)]``), one per call, in order,
    then answers: text at the steps before ``steps`` (the Run goes on to the next step),
    the Run's end at step ``steps``."""

    def __init__(self, errors: dict[str | tuple[str, int], list[BaseException]], steps: int = 1) -> None:
        self.errors = errors
        self.steps = steps
        self.calls: list[tuple[str, int]] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.calls.append((request.run_id, request.step))
        left = self.errors.get((request.run_id, request.step)) or self.errors.get(request.run_id, [])
        if left:
            raise left.pop(0)
        if request.step < self.steps:
            return ModelReply(f"step {request.step} done")
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class CountingHooks:
    """StepStart/BeforeInference that count their runs and stage the attempt's number."""

    def __init__(self) -> None:
        self.calls = 0

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        self.calls += 1
        return Staging()

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        return None


STORES = ("memory", "sqlite")


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _store(kind: str, tmp_path: Path, clock: Clock) -> Store:
    if kind == "memory":
        return MemoryStore(clock=clock)
    return SqliteStore(tmp_path / "runs.db", clock=clock)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(store_kind: str, tmp_path: Path, clock: Clock) -> Iterator[Store]:
    made = _store(store_kind, tmp_path, clock)
    yield made
    if isinstance(made, SqliteStore):
        made.close()


def _activate(store: Store, run_id: str, app: str = "flaky") -> None:
    decision = activation_step(None, Activate(f"t-{run_id}", run_id, 0, (Message(Role.USER, "go"),), app))
    assert decision.commit is not None
    store.append(decision.commit)


def _state(store: Store, run_id: str) -> Running | Ended:
    snapshot = store.run(run_id)
    assert snapshot is not None
    assert isinstance(snapshot.state, (Running, Ended)), snapshot.state
    return snapshot.state


def _version(store: Store, run_id: str) -> int:
    snapshot = store.run(run_id)
    assert snapshot is not None
    return snapshot.version


class Events:
    def __init__(self) -> None:
        self.seen: list[RuntimeEvent] = []

    def __call__(self, event: RuntimeEvent) -> None:
        self.seen.append(event)

    @property
    def commits(self) -> int:
        return sum(isinstance(e, Acknowledged) for e in self.seen)

    @property
    def model_failures(self) -> list[ModelFailed]:
        return [e for e in self.seen if isinstance(e, ModelFailed)]


# --- the default predicate and the backoff ---------------------------------------------


class WithStatus(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (TimeoutError("read timed out"), True),
        (ConnectionResetError("reset by peer"), True),
        (WithStatus(408), True),
        (WithStatus(409), True),
        (WithStatus(429), True),
        (WithStatus(500), True),
        (WithStatus(503), True),
        (WithStatus(400), False),
        (WithStatus(401), False),
        (WithStatus(404), False),
        (ValueError("bad request body"), False),
        (KeyError("choices"), False),
    ],
    ids=lambda value: value if isinstance(value, bool) else f"{type(value).__name__}{getattr(value, 'status_code', '')}",
)
def test_the_default_predicate_takes_timeouts_dropped_connections_and_retryable_statuses(
    error: BaseException, transient: bool
) -> None:
    assert transient_model_error(error) is transient


def test_the_backoff_doubles_from_one_second_and_is_capped() -> None:
    assert [model_backoff(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


# --- pull mode: the Runtime ---------------------------------------------------------------


def _runtime(store: Store, model: FlakyModel, events: Events, **options: Any) -> Runtime:
    return Runtime(store, model, ToolRegistry({}), on_event=events, **options)


def _drive_through_pauses(runtime: Runtime, store: Store, run_id: str) -> tuple[list[float], list[int]]:
    """Drive ``run_id`` to its end, taking every backoff as the injected clock would
    (no sleep): the pauses asked for, and the Run's version at each."""
    drive = runtime.begin_drive(run_id)
    pauses, versions = [], []
    while not drive.step():
        if drive.pause is not None:
            pauses.append(drive.pause)
            versions.append(_version(store, run_id))
    return pauses, versions


def test_a_transient_model_error_commits_nothing_and_the_call_succeeds_after_three(store: Store) -> None:
    _activate(store, "r1")
    before = _version(store, "r1")
    model = FlakyModel({"r1": [TimeoutError("t1"), Overloaded("slow down"), ConnectionResetError("reset")]})
    events, hooks = Events(), CountingHooks()
    runtime = _runtime(store, model, events, hooks=hooks)
    pauses, versions = _drive_through_pauses(runtime, store, "r1")
    assert pauses == [1.0, 2.0, 4.0]
    assert versions == [before] * 3, "a transient model error committed something"
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert events.commits == 1, "the failed attempts committed"  # the reply that ends the Run
    assert [(f.step, f.attempt, f.error.type, f.retry_after) for f in events.model_failures] == [
        (1, 1, "TimeoutError", 1.0),
        (1, 2, "Overloaded", 2.0),
        (1, 3, "ConnectionResetError", 4.0),
    ]
    assert model.calls == [("r1", 1)] * 4
    assert hooks.calls == 4, "StepStart/BeforeInference run again before each attempt"
    print(f"pull: 3 transient failures, pauses {pauses}, commits {events.commits}, model calls {len(model.calls)}")


def test_the_last_attempt_ends_the_run_failed_with_its_error(store: Store) -> None:
    _activate(store, "r1")
    model = FlakyModel({"r1": [Overloaded(f"slow down {n}") for n in range(1, 10)]})
    events = Events()
    runtime = _runtime(store, model, events, model_attempts=3)
    pauses, _ = _drive_through_pauses(runtime, store, "r1")
    assert len(model.calls) == 3, f"{len(model.calls)} model calls for model_attempts=3"
    assert pauses == [1.0, 2.0]
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.FAILED, TypedError("Overloaded", "slow down 3")))
    assert [f.retry_after for f in events.model_failures] == [1.0, 2.0, None]
    assert events.commits == 1  # the end, nothing before it
    print(f"pull: cap 3 reached after {len(model.calls)} calls, pauses {pauses}")


def test_a_non_transient_model_error_ends_the_run_failed_at_once(store: Store) -> None:
    _activate(store, "r1")
    model = FlakyModel({"r1": [ValueError("invalid request: max_tokens")]})
    events = Events()
    pauses, _ = _drive_through_pauses(_runtime(store, model, events), store, "r1")
    assert pauses == [] and len(model.calls) == 1
    assert _state(store, "r1") == Ended(
        EndCause(EndCauseKind.FAILED, TypedError("ValueError", "invalid request: max_tokens"))
    )


def test_the_hosts_predicate_decides_what_is_transient(store: Store) -> None:
    _activate(store, "r1")
    _activate(store, "r2")
    model = FlakyModel({"r1": [ValueError("flaky")], "r2": [TimeoutError("t")]})
    runtime = _runtime(store, model, Events(), transient=lambda error: isinstance(error, ValueError))
    assert _drive_through_pauses(runtime, store, "r1")[0] == [1.0]
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert _drive_through_pauses(runtime, store, "r2")[0] == []
    assert _state(store, "r2") == Ended(EndCause(EndCauseKind.FAILED, TypedError("TimeoutError", "t")))


def test_the_count_restarts_at_each_model_call(store: Store) -> None:
    _activate(store, "r1")
    # two failures at step 1, two at step 2: within model_attempts=3 for each call
    errors: dict[str | tuple[str, int], list[BaseException]] = {
        ("r1", 1): [TimeoutError("a"), TimeoutError("b")],
        ("r1", 2): [TimeoutError("c"), TimeoutError("d")],
    }
    model = FlakyModel(errors, steps=2)
    pauses, _ = _drive_through_pauses(_runtime(store, model, Events(), model_attempts=3), store, "r1")
    assert pauses == [1.0, 2.0, 1.0, 2.0]
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert model.calls == [("r1", 1)] * 3 + [("r1", 2)] * 3


def test_a_cancel_queued_during_the_backoff_is_applied_before_the_model_is_called_again(store: Store) -> None:
    _activate(store, "r1")
    model = FlakyModel({"r1": [TimeoutError("t")]})
    drive = _runtime(store, model, Events()).begin_drive("r1")
    while drive.pause is None:
        assert not drive.step()
    assert isinstance(submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    while not drive.step():
        pass
    assert model.calls == [("r1", 1)], "the model was called again after a cancel"
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.CANCELLED))


class CheckpointsBreak(MemoryStore):
    """A store whose checkpoint writes fail with something no store error covers."""

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        raise OSError("disk full")


class StreamingModel:
    """Saves a checkpoint while it infers; raises what the stream raised as its own
    (a transient-looking error, as an SDK wrapping a failed callback might)."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        try:
            request.stream.checkpoint({"partial": "hel"})
        except OSError as error:
            raise TimeoutError("stream callback failed") from error
        return ModelReply("hello", end=EndCauseKind.COMPLETED)


def test_an_error_the_streams_checkpoint_raised_under_the_model_is_no_model_error() -> None:
    store = CheckpointsBreak()
    _activate(store, "r1")
    events = Events()
    drive = Runtime(store, StreamingModel(), ToolRegistry({}), on_event=events).begin_drive("r1")
    with pytest.raises(TimeoutError, match="stream callback failed"):
        for _ in range(20):  # a drive that takes the failure for the model's retries for ever
            if drive.step():
                break
            assert drive.pause is None, "the runtime's own failure was taken for a transient model error"
    assert events.model_failures == [] and isinstance(_state(store, "r1"), Running)


# --- pull mode under the worker --------------------------------------------------------------


def _worker(
    store: Store, model: FlakyModel, clock: Clock, worker_id: str, *, lease: float = 4.0, **options: Any
) -> Worker:
    app = RuntimeApp("flaky", model, ToolRegistry({}), **options)
    # one slot: the Run backing off is set aside on the test's clock, and the worker drives others (a slot waits its backoff out)
    return Worker(store, app, worker_id=worker_id, lease_duration=lease, monotonic=clock, concurrency=1)


TICK = 0.5  # how often the worker's loop comes round in these tests (run() polls each second)


def test_a_worker_keeps_and_renews_the_lease_of_a_run_backing_off_and_drives_another_meanwhile(
    store: Store, clock: Clock
) -> None:
    _activate(store, "r1")
    _activate(store, "r2")
    # four transient failures: waits of 1 + 2 + 4 + 8 s, far longer than one 4 s lease
    model = FlakyModel({"r1": [Overloaded(f"slow down {n}") for n in range(1, 5)]})
    worker = _worker(store, model, clock, "w1")
    before = _version(store, "r1")
    worker.run_once()
    assert isinstance(_state(store, "r2"), Ended), "the other Run was not driven meanwhile"
    first = store.current_lease("r1")
    assert first is not None and first.worker_id == "w1"
    expiries, ticks = {first.expires_at}, 0
    while isinstance(_state(store, "r1"), Running):
        assert _version(store, "r1") == before, "a transient model error committed something"
        held = store.current_lease("r1")
        assert held is not None and held.worker_id == "w1" and held.epoch == first.epoch, (
            f"at {clock.now}: the lease of the Run backing off is {held}"
        )
        with pytest.raises(LeaseHeld):
            store.acquire_lease("r1", "w2", 4.0)  # no other worker could take it
        expiries.add(held.expires_at)
        clock.now += TICK
        worker.run_once()
        ticks += 1
        assert ticks < 100
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert clock.now - 1000.0 >= 15.0 and max(expiries) >= 1015.0, "the backoff did not outlive the first lease"
    assert store.current_lease("r1") is None, "the lease was kept after the Run ended"
    report = worker.report
    assert (report.model_failures, report.failures, report.leases_lost, report.takeovers) == (4, 0, 0, 0)
    print(
        f"worker: r1 backed off {clock.now - 1000.0:g} s over 4 transient failures under a 4 s lease, "
        f"r2 driven meanwhile; lease expiry {first.expires_at:g} -> {max(expiries):g}, "
        f"renewals {worker.leases.renewals}, epoch {first.epoch} throughout; {report}"
    )


def test_after_a_take_over_the_count_of_attempts_restarts(store: Store, clock: Clock) -> None:
    _activate(store, "r1")
    # four failures in a row: more than model_attempts=3 allows in one worker's hands
    model = FlakyModel({"r1": [Overloaded(f"slow down {n}") for n in range(1, 5)]})
    first = _worker(store, model, clock, "w1", model_attempts=3)
    first.run_once()
    clock.now += 1.0
    first.run_once()
    assert first.report.model_failures == 2  # then w1 stops, its lease left to expire
    clock.now += 10.0
    events = Events()
    second = _worker(store, model, clock, "w2", model_attempts=3)
    second._on_event = events  # what ``runkernel worker`` prints from
    second.run_once()
    taken = store.current_lease("r1")
    assert taken is not None and (taken.worker_id, taken.epoch) == ("w2", 2)
    for _ in range(10):
        clock.now += TICK
        second.run_once()
    assert [f.attempt for f in events.model_failures] == [1, 2], "the count did not restart after the take-over"
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert len(model.calls) == 5 and second.report.leases_lost == 0
    print(f"take-over: w1 saw 2 failures, w2 counted {len(events.model_failures)} from 1, then success")


def test_a_run_set_aside_whose_lease_lapsed_is_picked_up_afresh_not_resumed(store: Store, clock: Clock) -> None:
    """Forced interleaving: while w1 drives one Run set aside (r0), the lease of the next
    one due (r1) lapses and w2 takes r1 over and ends it; w1 must not go on with what it
    believed of r1 (its model would be called for an Ended Run)."""
    _activate(store, "r0")
    _activate(store, "r1")
    rescuer = LeaseKeeper(store, "w2", duration=4.0, monotonic=clock)
    rescue = Runtime(store, FlakyModel({}), ToolRegistry({}), leases=rescuer)

    class TakeOverDuring(FlakyModel):
        def infer(self, request: InferenceRequest) -> ModelReply:
            if request.run_id == "r0" and len(self.calls) == 2:  # r0's second attempt
                clock.now = 1004.5  # r1's lease (taken at 1000) lapsed; r0's (at 1001) holds
                assert rescue.drive("r1").status == "ended"
                rescuer.release_all()
            return super().infer(request)

    model = TakeOverDuring({"r0": [Overloaded("slow down")], "r1": [Overloaded("slow down")]})
    worker = _worker(store, model, clock, "w1")
    worker.run_once()  # both fail once: set aside, due at 1001
    clock.now = 1001.0
    worker.run_once()  # r0 resumed (and r1 taken over meanwhile), then r1 is due
    assert _state(store, "r0") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert _state(store, "r1") == Ended(EndCause(EndCauseKind.COMPLETED))
    assert model.calls == [("r0", 1), ("r1", 1), ("r0", 1)], f"w1 called the model for the taken Run: {model.calls}"
    assert worker.report.conflicts == 0 and worker.report.failures == 0


def test_shutdown_releases_the_lease_of_a_run_set_aside(store: Store, clock: Clock) -> None:
    _activate(store, "r1")
    worker = _worker(store, FlakyModel({"r1": [Overloaded("slow down")]}), clock, "w1")
    worker.run_once()
    assert store.current_lease("r1") is not None
    worker.shutdown()
    worker.run_once()
    assert store.current_lease("r1") is None


# --- push mode: both shells --------------------------------------------------------------------


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_reports_transient_errors_and_gets_the_same_infer_with_a_backoff(
    kind: str, store: Store
) -> None:
    driver = make_shell(kind, store)
    action = driver.start(["go"], run_id="r1")
    assert isinstance(action, Infer) and (action.attempt, action.retry_after) == (1, 0.0)
    version = _version(store, "r1")
    seen = []
    for error in (TimeoutError("t"), Overloaded("slow down"), ConnectionResetError("reset")):
        action = driver.inference_failed(error)
        assert isinstance(action, Infer) and action.step == 1
        seen.append((action.attempt, action.retry_after))
        assert _version(store, "r1") == version, "a transient model error committed something"
    assert seen == [(2, 1.0), (3, 2.0), (4, 4.0)]
    done = driver.inferred("done", end=EndCauseKind.COMPLETED)
    assert isinstance(done, Done) and done.cause == EndCause(EndCauseKind.COMPLETED)
    assert _version(store, "r1") == version + 1
    print(f"push {kind}: attempts and waits {seen}, one commit after them")


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_whose_attempts_run_out_gets_done_failed(kind: str, store: Store) -> None:
    driver = make_shell(kind, store, model_attempts=2)
    action = driver.start(["go"], run_id="r1")
    action = driver.inference_failed(Overloaded("slow down 1"))
    assert isinstance(action, Infer) and action.attempt == 2
    done = driver.inference_failed(Overloaded("slow down 2"))
    failed = EndCause(EndCauseKind.FAILED, TypedError("Overloaded", "slow down 2"))
    assert isinstance(done, Done) and done.cause == failed
    assert _state(store, "r1") == Ended(failed)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_reporting_a_non_transient_error_gets_done_failed_at_once(kind: str, store: Store) -> None:
    driver = make_shell(kind, store)
    driver.start(["go"], run_id="r1")
    done = driver.inference_failed(PermissionError("invalid api key"))
    failed = EndCause(EndCauseKind.FAILED, TypedError("PermissionError", "invalid api key"))
    assert isinstance(done, Done) and done.cause == failed
    assert _state(store, "r1") == Ended(failed)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_driver_renews_its_lease_when_it_hands_a_retried_infer(kind: str, store: Store, clock: Clock) -> None:
    leases = LeaseKeeper(store, "w1", duration=2.0, monotonic=clock)
    _activate(store, "r1")
    leases.take("r1")
    driver = make_shell(kind, store, leases=leases)
    driver.pick_up("r1")
    first = store.current_lease("r1")
    assert first is not None
    clock.now += 1.5  # the renewal is due, and nothing commits while the host waits
    action = driver.inference_failed(TimeoutError("t"))
    assert isinstance(action, Infer) and action.retry_after == 1.0
    renewed = store.current_lease("r1")
    assert renewed is not None and renewed.expires_at > first.expires_at, "the wait would outlive the lease"


@pytest.mark.parametrize("kind", SHELLS)
def test_inference_failed_answers_only_infer(kind: str, store: Store) -> None:
    driver = make_shell(kind, store)
    driver.start(["go"], run_id="r1")
    waiting = driver.inferred("paying", [CallRequest("pay", {"amount": 1})])
    assert isinstance(waiting, WaitFor)
    version = _version(store, "r1")
    with pytest.raises(HostProtocolError, match="inference_failed"):
        driver.inference_failed(TimeoutError("t"))
    assert _version(store, "r1") == version

