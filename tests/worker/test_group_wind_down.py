"""A worker that stops while a Run's concurrent group runs (Workers and leases: SIGTERM
finishes what is in flight and starts nothing new): the group's tools run in threads of
the Run's drive, so what is in flight is every call already started. Each one's result
is committed before the worker lets the Run go; nothing new starts (no retry, no model
call); the lease is released. Counts are printed, never durations."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from runkernel.adapters.drive.actions import RunCall
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry, ToolReply
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import CallCompleted, Message, Running
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel import CallRequest
from runkernel.testing import step

TOOLS = ("fetch", "book", "pay")
HANG = 120.0  # a guard against a hang, never a measure


class _Model:
    def __init__(self) -> None:
        self.steps: list[int] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.steps.append(request.step)
        if request.step == 1:
            return ModelReply("", tuple(CallRequest(tool, {"n": n}) for n, tool in enumerate(TOOLS)))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class _Held:
    """A concurrent tool whose body waits until the test lets it go."""

    def __init__(self, policy: ToolPolicy, started: threading.Semaphore, release: threading.Event) -> None:
        self.policy, self.started, self.release = policy, started, release
        self.runs = 0

    def run(self, invocation: RunCall) -> ToolReply:
        self.runs += 1
        self.started.release()
        assert self.release.wait(HANG), "the test never let the tool go"
        return Returned({"tool": invocation.tool})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("no recovery here")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_stopping_worker_commits_every_group_call_already_started_and_starts_nothing(
    kind: str, tmp_path: Path
) -> None:
    store: Store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "runs.db")
    decision = step(None, Activate("t1", "r1", 0, (Message(Role.USER, "book"),), "grouped"))
    assert decision.commit is not None
    store.append(decision.commit)
    started, release = threading.Semaphore(0), threading.Event()
    policies = {"fetch": ToolPolicy.replay(concurrent=True), "book": ToolPolicy.reconnect(concurrent=True),
                "pay": ToolPolicy.indeterminate(concurrent=True)}
    tools = {name: _Held(policy, started, release) for name, policy in policies.items()}
    model = _Model()
    worker = Worker(store, RuntimeApp("grouped", model, ToolRegistry(dict(tools))), worker_id="w1",
                    lease_duration=60.0, concurrency=2)
    ran = threading.Thread(target=worker.run_once)
    ran.start()
    for _ in TOOLS:
        assert started.acquire(timeout=HANG), "the group's tools did not all start"
    worker.shutdown()  # SIGTERM's path: finish what is in flight, start nothing new
    release.set()
    ran.join(HANG)
    assert not ran.is_alive()
    run = store.run("r1")
    assert run is not None and isinstance(run.state, Running)
    assert run.batch is not None and all(isinstance(c.status, CallCompleted) for c in run.batch.calls)
    print(f"[{kind}] stopped during a group of {len(TOOLS)}: {sum(t.runs for t in tools.values())} tool runs, "
          f"{sum(isinstance(c.status, CallCompleted) for c in run.batch.calls)} results committed, "
          f"model steps {model.steps}, lease holder after {store.lease_statuses(['r1'])}")
    assert [t.runs for t in tools.values()] == [1, 1, 1]
    assert model.steps == [1], "nothing new started: the next model call waits for the next worker"
    assert check_commits(list(store.commits("t1"))).verdict is Verdict.LEGAL
