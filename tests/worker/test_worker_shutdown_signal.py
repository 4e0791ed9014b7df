"""``Worker.shutdown()`` is safe in a signal handler: it takes no lock and sets no
event, so a SIGTERM landing at any bytecode of the worker's wait between polls (where a
``threading.Event`` would hold its lock) stops the worker, and the worker wakes from that
wait at once, a LISTEN wait on the store included; and a handler that runs on the
dispatcher's thread while it waits for a drive never makes it wait for ever. Counts,
never durations: the only bound is a hang's."""

from __future__ import annotations

import signal
import threading

import pytest

from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, ToolRegistry
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.kernel.values import EndCauseKind
from test_slots import Gathering, _activate, _app
from worker_signals import HANG, Landing, returned

#: signals sent to the dispatcher's thread, each handled while it waits for a drive
SIGNALS = 10


class Ends:
    """A model that ends every Run at once (no Run is ever found here anyway)."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        return ModelReply("done", end=EndCauseKind.COMPLETED)


APP = RuntimeApp(name="idle", model=Ends(), tools=ToolRegistry({}))


class CountedPolls(MemoryStore):
    """A store with no work that counts the polls and arms ``landing`` after the first;
    at the poll ``stop_at`` it asks ``stop`` (the dry run's end)."""

    def __init__(self, landing: Landing, stop_at: int | None = None) -> None:
        super().__init__()
        self.landing, self.stop_at = landing, stop_at
        self.polls = 0
        self.stop: Worker | None = None
        #: bytecodes counted since the first poll when each later poll began
        self.began_at: list[int] = []

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        self.polls += 1
        if self.polls > 1:
            self.began_at.append(self.landing.counted)
        if self.polls == self.stop_at and self.stop is not None:
            self.stop.shutdown()
        found = super().runs_with_work(app, limit, version=version)
        if self.polls == 1:
            self.landing.arm()
        return found


def _idle_worker(store: MemoryStore, concurrency: int, poll: float) -> Worker:
    return Worker(store, APP, worker_id="w1", poll_interval=poll, concurrency=concurrency)


@pytest.mark.parametrize("concurrency", [1, 2], ids=["serial", "slots"])
def test_a_shutdown_landing_at_any_bytecode_of_the_wait_between_polls_stops_the_worker(concurrency: int) -> None:
    # a dry run: how many bytecodes one whole pass takes, from the first poll's end to the
    # second poll (the rest of the pass, then the wait: a short one, so every pass ends)
    counting = Landing(lambda: None)
    dry = CountedPolls(counting, stop_at=2)
    dry.stop = _idle_worker(dry, concurrency, poll=0.001)
    assert returned(dry.stop.run, counting)
    pass_length = dry.began_at[0]
    hung, stopped = [], 0
    for at in range(1, pass_length + 1):
        landing = Landing(lambda: None, at=at)
        store = CountedPolls(landing)
        worker = _idle_worker(store, concurrency, poll=0.001)
        landing.handler = worker.shutdown  # what the SIGTERM handler calls
        if not returned(worker.run, landing):
            hung.append(at)
            break  # its thread waits for itself for ever: one is enough
        stopped += landing.fired and store.polls <= 2
    print(f"shutdown landed at each of {pass_length} bytecodes of a pass ({concurrency} slot(s)): "
          f"{stopped} stopped the worker, hung at {hung}")
    assert not hung, f"shutdown() in a handler landing at bytecode {hung[0]} of the wait waited for its own thread"
    assert stopped == pass_length


class Listening(MemoryStore):
    """A store that offers a LISTEN wait (as PostgreSQL does) that no notification ends:
    only its timeout, counted."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0
        self.waiting = threading.Event()
        self._never = threading.Event()

    def wait_for_work(self, timeout: float) -> list[str]:
        self.waits += 1
        if timeout > 0:
            self.waiting.set()
            self._never.wait(timeout)
        return []


@pytest.mark.parametrize("concurrency", [1, 2], ids=["serial", "slots"])
def test_a_shutdown_wakes_the_worker_from_a_listen_wait_long_before_its_poll_is_due(concurrency: int) -> None:
    store = Listening()
    worker = Worker(store, APP, worker_id="w1", poll_interval=10 * HANG, concurrency=concurrency)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert store.waiting.wait(HANG), "the worker never waited for work"
    worker.shutdown()
    thread.join(HANG)
    print(f"LISTEN waits before the worker stopped ({concurrency} slot(s)): {store.waits}")
    assert not thread.is_alive(), "the worker sat out its whole poll interval in the store's LISTEN wait"


class CountedWork(MemoryStore):
    """A store whose polls are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.polls = 0

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        self.polls += 1
        return super().runs_with_work(app, limit, version=version)


def test_the_dispatcher_goes_on_after_a_signal_handler_outlasts_its_wait_for_a_drive() -> None:
    # CPython 3.11's SimpleQueue.get(timeout) waits for ever when a signal handler runs on
    # the waiting thread past its deadline: the dispatcher then stopped polling and
    # renewing until a drive finished (the 4-slot race hung on it: every slot stalled by
    # the very signal whose handler made the dispatcher wait, the signal letting them go
    # delivered to another thread)
    release = threading.Event()
    tool = Gathering(release=release)
    store = CountedWork()
    _activate(store, "long")  # one drive in flight, held by its tool; a slot free: polls go on
    worker = Worker(store, _app(tool), worker_id="w1", concurrency=2, poll_interval=0.01)
    main = threading.get_ident()
    handled: list[int] = []
    went_on: list[bool] = []

    def slow_handler(_signum: int, _frame: object) -> None:
        handled.append(store.polls)
        threading.Event().wait(0.05)  # a handler that outlasts the dispatcher's wait (5 polls)

    def signals() -> None:
        try:
            for _ in range(int(HANG / 0.01)):
                if tool.running:
                    break
                threading.Event().wait(0.01)  # the next look
            for _ in range(SIGNALS):
                before = len(handled)
                signal.pthread_kill(main, signal.SIGUSR1)
                polls = store.polls
                for _ in range(int(HANG / 0.01)):
                    if len(handled) > before and store.polls > polls + 1:
                        break
                    threading.Event().wait(0.01)  # the next look
                went_on.append(len(handled) > before and store.polls > polls + 1)
                if not went_on[-1]:
                    break
        finally:
            release.set()
            worker.shutdown()

    previous = signal.signal(signal.SIGUSR1, slow_handler)
    try:
        helper = threading.Thread(target=signals, daemon=True)
        helper.start()
        worker.run()  # the dispatcher on the main thread, where signal handlers run
        helper.join(HANG)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    print(f"{len(handled)} slow handlers on the dispatcher's thread; it polled on after each: {went_on}")
    assert went_on == [True] * SIGNALS, "the dispatcher stopped polling after a slow signal handler"
