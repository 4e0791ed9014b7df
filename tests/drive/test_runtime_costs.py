"""What the reference runtime asks of its store per Step, counted (Cost model).

A driver reads a Thread's history once when it picks a Run up and then appends each
acknowledged commit's messages; what each inference sees is still exactly the
committed log up to that point.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    InferenceRequest,
    ModelReply,
    Returned,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel import RunCall
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.state import Ended, Message, ThreadCommit
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.testing import ScriptedModel, StepScript

# the package re-exports functions under their modules' names: go by sys.modules
store_module = importlib.import_module("runkernel.adapters.stores.contract")
planning_module = importlib.import_module("runkernel.kernel.planning")
decide_module = importlib.import_module("runkernel.kernel.decide")
validate_module = importlib.import_module("runkernel.kernel.validate")


class CountingStore(MemoryStore):
    """A MemoryStore that counts whole-Thread reads."""

    def __init__(self) -> None:
        super().__init__()
        self.thread_reads = 0

    def messages(self, thread_id: str) -> list[Message]:
        self.thread_reads += 1
        return super().messages(thread_id)

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        self.thread_reads += 1
        return super().commits(thread_id)

    def logged_messages(self, thread_id: str) -> list[Message]:
        """The committed messages, read without counting (for the checks only)."""
        return super().messages(thread_id)


class EchoTool:
    policy = ToolPolicy()

    def run(self, invocation: RunCall) -> ToolReply:
        return Returned({"echo": invocation.arguments})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


class WatchingModel(ScriptedModel):
    """Checks at every inference that it sees exactly the committed messages."""

    def __init__(self, store: CountingStore, run_id: str, steps: int) -> None:
        script = [StepScript("use the tool", (("echo", {"i": i}),)) for i in range(steps)]
        super().__init__({run_id: script + [StepScript("done", end=EndCauseKind.COMPLETED)]})
        self.store = store
        self.mismatches = 0

    def infer(self, request: InferenceRequest) -> ModelReply:
        if list(request.messages) != self.store.logged_messages(request.thread_id):
            self.mismatches += 1
        return super().infer(request)


def _drive_one(store: CountingStore, thread_id: str, run_id: str, steps: int) -> tuple[int, WatchingModel]:
    model = WatchingModel(store, run_id, steps)
    before = store.thread_reads
    outcome = Runtime(store, model, ToolRegistry({"echo": EchoTool()})).start(
        thread_id, run_id, (Message(Role.USER, f"task of {run_id}"),)
    )
    assert isinstance(outcome.snapshot.state, Ended)
    return store.thread_reads - before, model


def test_the_runtime_reads_a_threads_history_once_per_run_whatever_its_length() -> None:
    reads = {}
    for steps in (3, 60):
        store = CountingStore()
        first, model = _drive_one(store, "t1", "r1", steps)
        assert model.inferences == steps + 1 and model.mismatches == 0
        second, model = _drive_one(store, "t1", "r2", steps)  # the Thread already has a Run
        assert model.inferences == steps + 1 and model.mismatches == 0
        reads[steps] = (first, second)
    print(f"\nThread reads per Run (new Thread, second Run): {reads}")
    assert reads[3] == reads[60] == (0, 1)


def test_a_recovering_runtime_reads_the_history_once_and_sees_all_of_it() -> None:
    store = CountingStore()
    _drive_one(store, "t1", "r1", 2)
    model = WatchingModel(store, "r2", 5)
    tools = ToolRegistry({"echo": EchoTool()})
    head = store.thread_head("t1")
    assert head is not None
    # a Run whose runtime died right after activation: a fresh one picks it up
    drive = Runtime(store, model, tools).begin_start("t1", "r2", (Message(Role.USER, "again"),))
    drive.step()  # the activation commit
    before = store.thread_reads
    outcome = Runtime(store, model, tools).drive("r2")
    assert isinstance(outcome.snapshot.state, Ended)
    assert store.thread_reads - before == 1
    assert model.mismatches == 0 and model.inferences == 6


# --- one durable transaction per commit ----------------------------------------------


class QuietModel(ScriptedModel):
    """A scripted model that streams no checkpoint."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        silent = InferenceRequest(
            request.thread_id, request.run_id, request.step, request.messages, request.partial, _NoStream()
        )
        return super().infer(silent)


class _NoStream:
    def delta(self, data: object) -> None:
        pass

    def checkpoint(self, partial: object) -> None:
        pass


def _script(steps: int) -> list[StepScript]:
    return [StepScript("use the tool", (("echo", {"i": i}),)) for i in range(steps)] + [
        StepScript("done", end=EndCauseKind.COMPLETED)
    ]


def _count_durable(store: SqliteStore, model: ScriptedModel) -> tuple[int, int]:
    """(ThreadCommits written, transactions committed on the durable connection)."""
    committed: list[str] = []
    store._db.set_trace_callback(lambda sql: committed.append(sql) if sql == "COMMIT" else None)
    try:
        outcome = Runtime(store, model, ToolRegistry({"echo": EchoTool()})).start(
            "t1", "r1", (Message(Role.USER, "go"),)
        )
    finally:
        store._db.set_trace_callback(None)
    assert isinstance(outcome.snapshot.state, Ended)
    return len(list(store.commits("t1"))), len(committed)


def test_one_durable_transaction_per_commit_checkpoints_aside(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    model = ScriptedModel({"r1": _script(20)})  # checkpoints at every inference
    commits, durable = _count_durable(store, model)
    scratch = store._scratch
    assert scratch is not None
    synchronous = scratch.execute("PRAGMA synchronous").fetchone()[0]
    print(f"\n{commits} commits, {durable} durable transactions; checkpoint connection synchronous={synchronous}")
    assert durable == commits
    assert synchronous == 0, "checkpoint writes wait for an fsync"
    assert store.load_checkpoint("r1") is None, "a checkpoint outlived the run"
    store.close()


def test_no_checkpoint_write_at_all_when_the_model_saves_none(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    commits, durable = _count_durable(store, QuietModel({"r1": _script(20)}))
    assert durable == commits
    assert store._scratch is None, "a checkpoint was deleted though none was saved"
    store.close()


# --- validation once on the commit path -------------------------------------------------


def _count_validations(monkeypatch: pytest.MonkeyPatch, self_check: bool) -> tuple[int, int]:
    """(commits, judgements) for one Run of 10 tool steps: the store's ``judge_commit``
    (by the named edge, or in full when that cannot tell) and the kernel's own
    ``validate_commit`` calls each count once."""
    calls = [0]

    def counting(original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return original(*args, **kwargs)

        return counted

    monkeypatch.setattr(store_module, "judge_commit", counting(store_module.judge_commit))
    for module in (planning_module, decide_module, validate_module):
        monkeypatch.setattr(module, "validate_commit", counting(validate_module.validate_commit))
    store = MemoryStore()
    model = ScriptedModel({"r1": _script(10)})
    runtime = Runtime(store, model, ToolRegistry({"echo": EchoTool()}), self_check=self_check)
    assert isinstance(runtime.start("t1", "r1", (Message(Role.USER, "go"),)).snapshot.state, Ended)
    return len(list(store.commits("t1"))), calls[0]


def test_each_commit_is_validated_once_by_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    commits, validations = _count_validations(monkeypatch, self_check=False)
    print(f"\n{commits} commits, {validations} validations (the activation's input check included)")
    assert validations == commits + 1  # the store's, and decide's check of the activation input


def test_the_self_check_judges_each_commit_a_second_time(monkeypatch: pytest.MonkeyPatch) -> None:
    commits, validations = _count_validations(monkeypatch, self_check=True)
    assert validations == 2 * commits  # the activation is judged by decide and the store
