"""App versions in the runtime and the worker (Versions, under Workers and leases): the
version an app declares or its tool table's digest is recorded on each activation; a
worker drives only the Runs of its version, of versions recorded compatible, or of none;
it registers in the store while it runs and forgets itself when it stops."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres_support import fresh_url
from runkernel.adapters.drive.actions import CallRequest
from runkernel.adapters.drive.app_version import tool_table_version
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry, ToolReply
from runkernel.adapters.drive.actions import RunCall
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.apps import RuntimeApp, version_of
from runkernel.adapters.worker.loop import Worker
from runkernel.errors import VersionRequired
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import Activate, OperationStatus
from runkernel.kernel.state import Ended, Message
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.testing import step


class OneCall:
    """Step 1 calls ``tool``; step 2 answers and ends."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("working", (CallRequest(self.tool, {"n": 1}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Counted:
    """A replay tool that counts its starts."""

    policy = ToolPolicy.replay()

    def __init__(self) -> None:
        self.starts = 0

    def run(self, invocation: RunCall) -> ToolReply:
        self.starts += 1
        return Returned({"ok": True})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


def _app(tool: str = "search", *, version: str | None = None) -> RuntimeApp:
    return RuntimeApp("shop", OneCall(tool), ToolRegistry({tool: Counted()}), version=version)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SqliteStore(tmp_path / "runs.db")
    else:
        pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
        from runkernel.adapters.stores.postgres import PostgresStore
        from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

        url = fresh_url("versions_worker")
        init_postgres(url)
        made = PostgresStore(url)
        request.addfinalizer(lambda: drop_store(url))
    yield made
    made.close()


def _activate_only(store: Store, app: RuntimeApp, run_id: str) -> None:
    """Activate a Run of ``app`` the way its driver does, and stop there (work for a worker)."""
    driver = Driver(store, dict(app.tools.policies.tools), app=app.name, app_version=version_of(app))
    driver.start(["go"], thread_id=f"t-{run_id}", run_id=run_id)


def _ended(store: Store, run_id: str) -> bool:
    snapshot = store.run(run_id)
    return snapshot is not None and isinstance(snapshot.state, Ended)


def test_the_default_version_is_the_tool_tables_digest() -> None:
    assert version_of(_app("search")) == version_of(_app("search"))
    assert version_of(_app("search")) == tool_table_version({"search": "replay"})
    assert version_of(_app("search")) != version_of(_app("lookup")), "a renamed tool is new code"
    other_policy = RuntimeApp("shop", OneCall("search"), ToolRegistry({"search": _Indeterminate()}))
    assert version_of(other_policy) != version_of(_app("search")), "a changed policy is new code"
    assert version_of(_app(version="2026-12-07")) == "2026-12-07"


class _Indeterminate(Counted):
    policy = ToolPolicy.indeterminate()


def test_an_app_whose_tools_are_listed_while_it_runs_must_declare_its_version() -> None:
    class McpApp:
        name = "mcp-shop"
        tools = {"local": "replay"}
        dynamic_tools = True

        def serve(self, driver: Driver, action: object) -> None:
            raise AssertionError("never driven")

    with pytest.raises(VersionRequired, match="declare its version"):
        version_of(McpApp())
    with pytest.raises(VersionRequired, match="declare its version"):
        Worker(MemoryStore(), McpApp())
    declared = McpApp()
    declared.version = "mcp-1"  # type: ignore[attr-defined]
    assert version_of(declared) == "mcp-1"


def test_a_driver_records_the_apps_version_and_a_worker_of_the_same_code_drives_it(store: Store) -> None:
    app = _app()
    Driver(store, {"search": "replay"}, app="shop").start(["go"], thread_id="t1", run_id="r1")
    (row,) = store.list_runs()
    assert row.app_version == version_of(app), "the driver's default is the worker's: one digest"
    assert [c.app_version for c in store.commits("t1")] == [version_of(app)]
    Worker(store, app, worker_id="w1").run_once()
    assert _ended(store, "r1")


def test_a_worker_drives_only_the_versions_it_may(store: Store) -> None:
    old, new = _app("search"), _app("lookup")
    _activate_only(store, old, "r-old")
    _activate_only(store, new, "r-new")
    # a Run activated before versions existed: any worker of its app drives it
    legacy = step(None, Activate("t-legacy", "r-x", 0, (Message(Role.USER, "go"),), "shop"))
    assert legacy.commit is not None
    store.append(legacy.commit)
    assert {s.run_id: s.app_version for s in store.list_runs()}["r-x"] is None
    newer = Worker(store, new, worker_id="w-new")
    report = newer.run_once()
    assert _ended(store, "r-new") and _ended(store, "r-x") and not _ended(store, "r-old")
    assert report.drives == 2
    assert store.writer_of("t-r-new", 2) is not None and store.writer_of("t-r-new", 2).worker_id == "w-new"  # type: ignore[union-attr]
    # the operator records that the new code may drive the old Runs: the next poll finds them
    store.accept_versions("shop", version_of(new), [version_of(old)])
    again = Worker(store, new, worker_id="w-new-2").run_once()
    assert again.drives == 1 and _ended(store, "r-old")
    for thread, worker in (("t-r-old", "w-new-2"), ("t-legacy", "w-new")):
        writers = {w.worker_id for v in range(2, 8) if (w := store.writer_of(thread, v)) is not None}
        assert writers == {worker}


def test_a_worker_registers_while_it_runs_and_forgets_itself_when_it_stops(store: Store) -> None:
    app = _app()
    worker = Worker(store, app, worker_id="w-embedded", poll_interval=0.05)
    worker.start()
    registered = threading.Event()
    for _ in range(200):
        found = [w for w in store.workers() if w.worker_id == "w-embedded"]
        if found:
            registered.set()
            break
        threading.Event().wait(0.05)
    worker.stop(timeout=30)
    assert registered.is_set(), "the embedded worker registered"
    (record,) = found
    assert (record.app, record.version) == ("shop", version_of(app))
    assert record.live(store.store_time())
    assert store.workers() == [], "a stopped worker forgets itself"


def test_presence_heartbeats_when_due_rides_out_an_outage_and_registers_again() -> None:
    from runkernel.adapters.stores.contract import StoreUnavailable
    from runkernel.adapters.worker.presence import Presence

    class Flaky(MemoryStore):
        down = False

        def heartbeat_worker(self, worker_id: str) -> bool:
            if self.down:
                raise StoreUnavailable("the store is out")
            return super().heartbeat_worker(worker_id)

    store = Flaky()
    clock = [0.0]
    presence = Presence(store, "w1", "shop", "v1", 10.0, lambda: clock[0])
    presence.beat()
    assert [(w.worker_id, w.version) for w in store.workers()] == [("w1", "v1")] and presence.beats == 1
    clock[0] = 5.0
    presence.beat()  # not due yet: nothing asked of the store
    assert presence.beats == 1
    clock[0], store.down = 11.0, True
    presence.beat()  # an outage: skipped, never raised
    assert presence.beats == 1
    store.down = False
    store.forget_worker("w1")  # forgotten meanwhile (another tool, a restart of the registry)
    clock[0] = 11.5
    presence.beat()  # tried again at once after the outage, and registered again
    assert presence.beats == 2 and [w.worker_id for w in store.workers()] == ["w1"]
    presence.leave()
    assert store.workers() == []


class _Steps:
    """Calls ``tool`` at steps 1 to ``calls``, then ends."""

    def __init__(self, tool: str, calls: int) -> None:
        self.tool, self.calls = tool, calls

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step <= self.calls:
            return ModelReply("working", (CallRequest(self.tool, {"n": request.step}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


def test_a_one_slot_worker_heartbeats_with_its_commits_during_one_long_drive() -> None:
    """A one-slot worker polls only between drives; a drive of many long tool steps must
    not leave it listed as not live: it heartbeats (when due) as its commits are
    acknowledged, as a many-slot worker does with its renewal rounds."""
    clock = [0.0]
    during: list[float] = []

    class Watched(MemoryStore):
        def heartbeat_worker(self, worker_id: str) -> bool:
            snapshot = self.run("r1")
            if snapshot is not None and not isinstance(snapshot.state, Ended):
                during.append(clock[0])
            return super().heartbeat_worker(worker_id)

    class Slow(Counted):
        def run(self, invocation: RunCall) -> ToolReply:
            clock[0] += 20.0  # longer than a heartbeat interval, by the worker's own clock
            return super().run(invocation)

    store = Watched()
    tool = Slow()
    app = RuntimeApp("shop", _Steps("search", 4), ToolRegistry({"search": tool}))
    _activate_only(store, app, "r1")
    worker = Worker(store, app, worker_id="w1", concurrency=1, lease_duration=1000.0, monotonic=lambda: clock[0])
    worker.run_once()
    print(f"\none-slot drive of 4 tool steps, 20 s each: heartbeats during the drive at {during}")
    assert _ended(store, "r1") and tool.starts == 4
    assert len(during) >= 3, during
