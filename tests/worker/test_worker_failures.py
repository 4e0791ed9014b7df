"""A host's hooks (or push host) that raise must not stop a worker (probe F1): the drive is
counted as a failure and told to ``on_failure``, the lease is released, and the failing
Run does not starve the others (``run_once`` does not try it again in the same call,
``run`` skips it for a growing number of polls). A model's exception is no failed drive:
the one interpreter decides it (tests/drive/test_transient_model_errors.py); these tests raised
it from the model until then, and raise it from the BeforeInference hook now, the port
called just before the model."""

from __future__ import annotations

import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import Staging, ToolRegistry, ToolReply
from runkernel import RunCall
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.state import Ended
from runkernel.kernel.values import JsonValue
from test_worker import OneCall, Recording, _activate


class Exploding(Recording):
    """A tool that raises instead of answering for the Run ``bad``."""

    def run(self, invocation: RunCall) -> ToolReply:
        if invocation.run_id == "bad":
            self.starts.append(invocation)
            raise RuntimeError("tool exploded")
        return super().run(invocation)


class ExplodingHooks:
    """A BeforeInference hook that raises for one Run and stages nothing for the others."""

    def __init__(self, bad_run: str) -> None:
        self.bad_run = bad_run
        self.calls: list[str] = []

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        self.calls.append(run_id)
        if run_id == self.bad_run:
            raise ValueError("hook exploded")
        return Staging()

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        return None


def _app(hooks: ExplodingHooks, tool: Recording | None = None) -> RuntimeApp:
    return RuntimeApp("test", OneCall(), ToolRegistry({"work": tool or Recording()}), hooks=hooks)


class PollCounting(MemoryStore):
    """Counts the worker's polls and stops it in the wait after the ``polls``-th; its
    LISTEN wait answers at once (no poll interval is sat out)."""

    def __init__(self, polls: int) -> None:
        super().__init__()
        self.polls = polls
        self.polls_made = 0
        self.worker: Worker | None = None

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        self.polls_made += 1
        return super().runs_with_work(app, limit, version=version)

    def wait_for_work(self, timeout: float) -> list[str]:
        if timeout > 0 and self.polls_made >= self.polls and self.worker is not None:
            self.worker.shutdown()
        return []


def _ended(store: MemoryStore, run_id: str) -> bool:
    snapshot = store.run(run_id)
    return snapshot is not None and isinstance(snapshot.state, Ended)


def test_run_once_counts_a_hooks_exception_releases_the_lease_and_drives_the_others() -> None:
    store = MemoryStore()
    _activate(store, "bad", thread="t-bad")
    _activate(store, "good", thread="t-good")
    app = _app(ExplodingHooks("bad"))
    told: list[tuple[str, str]] = []
    worker = Worker(store, app, worker_id="w1", on_failure=lambda run_id, error: told.append((run_id, repr(error))))
    report = worker.run_once()
    assert told == [("bad", "ValueError('hook exploded')")]
    assert report.failures == 1
    assert store.current_lease("bad") is None
    assert _ended(store, "good")
    print(f"hooks: {report}")


def test_a_tool_that_raises_is_its_calls_outcome_not_a_failed_drive() -> None:
    store = MemoryStore()
    _activate(store, "bad", thread="t-bad")
    _activate(store, "good", thread="t-good")
    tool = Exploding()
    told: list[str] = []
    app = RuntimeApp("test", OneCall(), ToolRegistry({"work": tool}))
    report = Worker(store, app, worker_id="w1", on_failure=lambda run_id, _error: told.append(run_id)).run_once()
    assert told == [] and report.failures == 0
    assert _ended(store, "bad") and _ended(store, "good")
    assert len([start for start in tool.starts if start.run_id == "bad"]) == 1, "a raising tool ran again"


def test_run_once_drives_a_failing_run_once_and_every_other_run_to_its_end() -> None:
    store = MemoryStore()
    _activate(store, "bad", thread="t-bad")
    for index in range(3):
        _activate(store, f"good{index}", thread=f"t-good{index}")
    hooks = ExplodingHooks("bad")
    worker = Worker(store, _app(hooks), worker_id="w1")
    report = worker.run_once()
    assert hooks.calls.count("bad") == 1
    assert all(_ended(store, f"good{index}") for index in range(3))
    assert report.failures == 1
    print(f"run_once: {report}")


def test_run_skips_a_failing_run_for_a_growing_number_of_polls() -> None:
    store = PollCounting(polls=20)
    _activate(store, "bad", thread="t-bad")
    hooks = ExplodingHooks("bad")
    worker = Worker(store, _app(hooks), worker_id="w1")
    store.worker = worker
    report = worker.run()
    attempts = hooks.calls.count("bad")
    # tried at polls 1, 3, 6, 11 and 20: it sat out 1, 2, 4 and 8 polls in between
    assert attempts == 5, attempts
    assert report.failures == attempts
    assert store.current_lease("bad") is None
    print(f"run: {store.polls_made} polls, the failing Run tried {attempts} times")


def test_a_run_that_stops_failing_is_driven_again_at_once() -> None:
    store = PollCounting(polls=30)
    _activate(store, "bad", thread="t-bad")
    hooks = ExplodingHooks("bad")

    def heal(_run_id: str, _error: BaseException) -> None:
        if hooks.calls.count("bad") == 3:
            hooks.bad_run = "none"

    worker = Worker(store, _app(hooks), worker_id="w1", on_failure=heal)
    store.worker = worker
    worker.run()
    assert _ended(store, "bad")
    assert worker.report.failures == 3


class ExplodingHooksOfMany(ExplodingHooks):
    """A BeforeInference hook that raises for every Run whose id starts with ``bad``."""

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        if run_id.startswith("bad"):
            self.calls.append(run_id)
            raise ValueError("hook exploded")
        return Staging()


@pytest.mark.parametrize("loop", ["run_once", "run"])
def test_failing_runs_that_fill_the_stores_batch_do_not_hide_the_runs_behind_them(loop: str) -> None:
    store = PollCounting(polls=6)
    for index in range(2):  # the oldest Runs with work, as many as the worker lists at once
        _activate(store, f"bad{index}", thread=f"t-bad{index}")
    _activate(store, "good", thread="t-good")
    app = _app(ExplodingHooksOfMany("none"))
    worker = Worker(store, app, worker_id="w1", batch=2)
    store.worker = worker
    report = worker.run_once() if loop == "run_once" else worker.run()
    assert _ended(store, "good"), f"{loop}: the healthy Run behind two failing ones was never driven ({report})"
