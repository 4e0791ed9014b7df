"""A Hypothesis state machine over the reference runtime (``tests/drive/test_stateful_runtime.py``).

The machine plays everything outside the runtime: it starts Runs with drawn scripts,
advances the current ``Drive`` one effect at a time, kills runtimes at drawn crash
boundaries or with failing store writes, recovers with fresh runtimes that know only
the store, and sends good and bad commands through the CLI path (``submit_resume`` /
``submit_end``) and straight into the inbox. After every step it checks I1-I15 from
what the store and the downstream World say, never from what a runtime believed.

Every rule is always applicable and does nothing when it cannot act (no preconditions:
they waste draws: Hypothesis discards a step whose precondition fails). Forty steps are few for Runs that need twenty effects
each, so rules that drive (crash, failing write, recovery, ``advance_further``) let a
worker pick up the Run that needs it most when no drive is live, a crash stays armed
until some drive reaches a boundary of its kind, and scripts, gate answers and tool
behaviours are weighted towards executing tools. Besides the trace checker, the
invariants judge each tool's fixed retry and recovery policies from the commits
(``policy_problems``): an Executing{n} -> Executing{n+1} edge that is neither a retry, a
replay of a replay tool nor a reconnect answered ``not_found`` breaks I9 even when the
executor has not started yet.

Staged hooks and concurrent delegations: most examples run with hooks that stage state,
hand request-only context and react (``runtime_harness_hooks.py``); scripts draw batches
of two terminal-only delegations and an ordinary call, whose children (their script is
named in the call's arguments) the machine adopts as Runs of its own once activated. A
quiet parent ranks like an Awaiting Run (only its child's end wakes it); rules drive a
child while its parent is down and end a parent while its children run. One judge is fed
every commit in the order the store took it (parents and children together, so I15 is
judged across Threads), and ``runtime_harness_ledger.py`` checks what each new commit
says about staged state, reactions and children's termini.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Checkpoint, Lease, Settlement, Store, StoreUnavailable
from runkernel.kernel.state import RunSnapshot, ThreadCommit
from runtime_harness_invariants import RuntimeInvariants
from runtime_harness_rules import RuntimeRules


class _OrderedMemoryStore(MemoryStore):
    """A memory store that records the order of its appends across Threads; while
    ``fail_writes`` is set every append fails, and while ``fail_checkpoints`` is set
    every checkpoint write does (``StoreUnavailable``)."""

    def __init__(self, appended: list[tuple[str, int]]) -> None:
        super().__init__()
        self.appended = appended
        self.fail_writes = False
        self.fail_checkpoints = False

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        if self.fail_writes:
            raise StoreUnavailable("memory store: writes are failing (injected)")
        stored = super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)
        self.appended.append((commit.thread_id, commit.version))
        return stored

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        if self.fail_checkpoints:
            raise StoreUnavailable("memory store: checkpoint writes are failing (injected)")
        super().save_checkpoint(checkpoint)


class _OrderedSqliteStore(SqliteStore):
    """A SQLite store that records the order of its appends across Threads; while
    ``fail_checkpoints`` is set every checkpoint write fails (``StoreUnavailable``)."""

    def __init__(self, path: Path, appended: list[tuple[str, int]]) -> None:
        super().__init__(path)
        self.appended = appended
        self.fail_checkpoints = False

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        stored = super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)
        self.appended.append((commit.thread_id, commit.version))
        return stored

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        if self.fail_checkpoints:
            raise StoreUnavailable("checkpoint writes are failing (injected)")
        super().save_checkpoint(checkpoint)


class RuntimeMachine(RuntimeRules, RuntimeInvariants):
    """Runs, crashes, recoveries and commands against one store; subclasses pick it.

    The state and plumbing are in ``runtime_harness_state.py``, the rules in
    ``runtime_harness_rules.py``, the invariants in ``runtime_harness_invariants.py``;
    the tools, gate and crash plan in ``runtime_harness_world.py`` and what is drawn in
    ``runtime_harness_scripts.py``."""


class MemoryMachine(RuntimeMachine):
    """The machine on the in-process store (fail_writes injects write failures)."""

    memory: _OrderedMemoryStore

    def open_store(self) -> Store:
        self.memory = _OrderedMemoryStore(self.appended)
        return self.memory

    def fail_appends(self, failing: bool) -> None:
        self.memory.fail_writes = failing

    def fail_checkpoints(self, failing: bool) -> None:
        self.memory.fail_checkpoints = failing

    def checkpoints_failing(self) -> bool:
        return self.memory.fail_checkpoints


_FAIL_TRIGGERS = (
    "CREATE TEMP TRIGGER IF NOT EXISTS rk_fail_insert BEFORE INSERT ON main.runs "
    "BEGIN SELECT RAISE(ABORT, 'injected write failure'); END",
    "CREATE TEMP TRIGGER IF NOT EXISTS rk_fail_update BEFORE UPDATE ON main.runs "
    "BEGIN SELECT RAISE(ABORT, 'injected write failure'); END",
)


class SqliteMachine(RuntimeMachine):
    """The machine on a SQLite file in a fresh temporary directory.

    A write failure is injected inside the append transaction: temporary triggers make
    the write of the Run's row abort after the commit row was inserted, so the store's
    rollback must leave nothing half-written."""

    sqlite: _OrderedSqliteStore

    def open_store(self) -> Store:
        self.directory = Path(tempfile.mkdtemp(prefix="rk-stateful-"))
        self.sqlite = _OrderedSqliteStore(self.directory / "store.db", self.appended)
        return self.sqlite

    def fail_appends(self, failing: bool) -> None:
        db = self.sqlite._db
        if failing:
            for sql in _FAIL_TRIGGERS:
                db.execute(sql)
        else:
            db.execute("DROP TRIGGER IF EXISTS temp.rk_fail_insert")
            db.execute("DROP TRIGGER IF EXISTS temp.rk_fail_update")

    def fail_checkpoints(self, failing: bool) -> None:
        self.sqlite.fail_checkpoints = failing

    def checkpoints_failing(self) -> bool:
        return self.sqlite.fail_checkpoints

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.sqlite.close()
        shutil.rmtree(self.directory, ignore_errors=True)
