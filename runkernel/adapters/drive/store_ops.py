"""The core's store operations carried out, for every host of the core (the push
driver's shells and the pull-mode runtime), so the modes cannot drift: the leased write
and its retry (W4), the child's activation under the parent's lease check (W1),
checkpoints best effort, inbox settlements, and what each reports to ``on_event``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

import attrs

from runkernel.adapters.drive.actions import RunCall
from runkernel.adapters.drive.delegations import cancel_child, cancel_if_parent_ended, find_child
from runkernel.adapters.drive.events import Acknowledged, CheckpointLost, CommandSettled, CommitRetried, Position, RuntimeEvent, position_of
from runkernel.adapters.drive.lease_keeper import APPEND_RETRIES, LeaseKeeper
from runkernel.adapters.drive.ports import NullObserver, Observer
from runkernel.adapters.drive.protocol import (
    ActivateChild, Append, CancelOwed, Compact, DropCheckpoint, KeepLease, Observe, Operation, Pending, ReadChild,
    ReadCommands, ReadHead, ReadLookups, ReadMessages, ReadPickUp, ReadTrace, SaveCheckpoint, SendCancel, Settle, Tell,
)
from runkernel.adapters.drive.telemetry import NO_TELEMETRY, Telemetry
from runkernel.adapters.stores.contract import CommitConflict, Lease, Settlement, Store, StoreUnavailable, append_to
from runkernel.adapters.stores.folded_reads import pending_commands, read_pick_up
from runkernel.kernel.protocol import NotifyWait, PublishResults, RunHook
from runkernel.kernel.state import RunSnapshot, ThreadCommit


class StoreOps:
    """Carries out the core's store operations, for every host of the core (the push
    driver's shells and the pull-mode runtime): the leased write and its retry, the
    child's activation under the parent's lease check (W1), checkpoints best effort,
    inbox settlements, and what each reports to ``on_event``. A test that kills a host
    around a commit wraps the store (``runkernel.testing.CrashingStore``)."""

    def __init__(
        self,
        store: Store,
        leases: LeaseKeeper | None,
        on_event: Callable[[RuntimeEvent], None],
        observer: Observer | None = None,
        *,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        # leases: a worker's LeaseKeeper. The Run is leased when it is started or picked
        # up, every commit names the lease, and an executor starts only after the lease
        # is re-checked with its margin (W1), its epoch the fencing token.
        self.store = store
        self.leases = leases
        self.on_event = on_event
        self.observer = observer or NullObserver()
        self.telemetry = telemetry
        #: a store that reads trace contexts back keeps them (``append(trace_context=)``);
        #: any other store is never handed one
        self.keeps_traces = callable(getattr(store, "trace_context", None))

    def lease(self, run_id: str, *, picking_up: bool = False) -> None:
        """Take the Run's lease before it is driven (``LeaseHeld``: another worker drives
        it). ``picking_up``: the drive reads the Run next, so where the store can, that
        read comes with the take and answers the drive's first operation, ``ReadPickUp``."""
        if self.leases is not None and self.leases.held(run_id) is None:
            if picking_up:
                self.leases.take_and_pick_up(run_id)
            else:
                self.leases.take(run_id)

    def before_run_call(self, action: RunCall) -> RunCall:
        """W1: the lease re-checked, with its margin, immediately before an executor
        starts; the call carries its epoch as fencing token."""
        if self.leases is not None:
            action = attrs.evolve(action, lease_epoch=self.leases.before_executor(action.run_id).epoch)
        self.telemetry.executing(action)
        return action

    def lease_epoch(self, run_id: str) -> int | None:
        """W5: the epoch a ``CheckStatus`` or ``Fence`` carries downstream, the lease
        held (renewed if due; the commit that follows is checked against it by the
        store); None without leases."""
        return None if self.leases is None else self.leases.for_commit(run_id).epoch

    def perform(self, op: Operation) -> Any:
        store = self.store
        # the pick-up read with the lease take answers only the first operation after it
        # (a read of the trace context, which changes nothing, passes it on)
        picked = None if self.leases is None or isinstance(op, ReadTrace) else self.leases.picked_up()
        match op:
            case Append():
                return self._append(op)
            case ReadLookups():
                return store.history(op.run_id)
            case ReadPickUp():
                if picked is not None and picked[0] == op.run_id:
                    return picked[1]
                return read_pick_up(store, op.run_id)
            case CancelOwed():
                cancel_if_parent_ended(store, op.run_id)
                return None
            case ReadHead():
                return store.thread_head(op.thread_id)
            case ReadMessages():
                return store.messages(op.thread_id)
            case Pending():
                return pending_commands(store, op.run_id, op.committed)
            case ReadCommands():
                return store.commands(op.run_id)
            case Settle():
                store.settle_command(op.entry.entry_id, op.outcome)
                self.telemetry.settled(op.entry, op.outcome)
                self.on_event(CommandSettled(op.entry, op.outcome))
                return None
            case Compact():
                store.compact_commands(op.run_id)
                return None
            case SaveCheckpoint():
                try:
                    store.save_checkpoint(op.checkpoint)
                except StoreUnavailable as error:
                    self.on_event(CheckpointLost(op.checkpoint.run_id, str(error)))
                return None
            case DropCheckpoint():
                try:
                    store.delete_checkpoint(op.run_id)
                except StoreUnavailable as error:
                    # a stale checkpoint is never truth: it names a step that has passed
                    self.on_event(CheckpointLost(op.run_id, str(error)))
                return None
            case ReadChild():
                return find_child(store, op.child)
            case ActivateChild():
                return self._activate_child(op)
            case SendCancel():
                cancel_child(store, op.child.run_id)
                return None
            case Observe():
                self._observe(op)
                return None
            case Tell():
                self.on_event(op.event)
                return None
            case ReadTrace():
                return _stored_trace(store, op.run_id)
            case KeepLease():
                if self.leases is not None:
                    self.leases.for_commit(op.run_id)  # renewed if its renewal is due
                return None
        raise AssertionError(f"not a store operation: {op!r}")

    def _append(self, op: Append) -> RunSnapshot:
        with self.telemetry.commit(op.commit, op.prev):
            stored = self._write(op.commit, op.prev is None, op.settle) if self.leases is None else self._leased_append(op)
        self.on_event(Acknowledged(op.commit, position_of(op.prev, op.commit)))
        if op.applies is not None:
            # settled in the commit's own transaction: no crash falls in between
            self.telemetry.settled(op.applies, "applied")
            self.on_event(CommandSettled(op.applies, "applied"))
        return stored

    def _write(
        self,
        commit: ThreadCommit,
        activation: bool,
        settle: Settlement | None = None,
        lease: Lease | None = None,
        release: bool = False,
    ) -> RunSnapshot:
        """The store's append; a Run's activation carries the telemetry's trace context
        into the same transaction (none without telemetry), and a quiet commit releases
        its lease in it. Each keyword is passed only when it says something, so a store
        (or a test's wrapper) that takes neither is called as before."""
        context = self.telemetry.activation_context(commit) if activation and self.keeps_traces else None
        return append_to(self.store, commit, settle, lease=lease, release=release, trace_context=context)

    def _leased_append(self, op: Append) -> RunSnapshot:
        """A leased write; a quiet commit gives the lease up in its own transaction, so
        the drive then holds no lease (a later commit of this drive takes it again)."""
        stored = self._retried(op)
        if op.quiet:
            assert self.leases is not None
            self.leases.released(op.commit.run_id)
        return stored

    def _retried(self, op: Append) -> RunSnapshot:
        """W4: a leased write whose reply was lost (the store became unavailable) is
        retried as it is; the store adopts it if it had landed, so it is never written
        twice."""
        assert self.leases is not None
        run_id = op.commit.run_id
        for _ in range(APPEND_RETRIES):
            try:
                return self._write(op.commit, op.prev is None, op.settle, self.leases.for_commit(run_id), op.quiet)
            except StoreUnavailable as error:
                self.on_event(CommitRetried(op.commit, str(error)))
        return self._write(op.commit, op.prev is None, op.settle, self.leases.for_commit(run_id), op.quiet)

    def _activate_child(self, op: ActivateChild) -> RunSnapshot | None:
        if self.leases is not None and op.commit.parent is not None:
            # W1: a concurrent delegation's executor is its child's activation
            self.leases.before_executor(op.commit.parent.run_id)
        try:
            with self.telemetry.commit(op.commit, None):
                stored = self._write(op.commit, True)
        except CommitConflict:
            return None  # activated by another writer: the same child, checked on identity
        self.on_event(Acknowledged(op.commit, Position.ACTIVATION))
        return stored

    def _observe(self, op: Observe) -> None:
        effect = op.effect
        match effect:
            case RunHook():
                self.observer.hook(op.run_id, effect.hook, effect.call_id)
            case NotifyWait():
                self.observer.notify(op.run_id, effect.ticket, effect.wait)
            case PublishResults():
                self.observer.publish(op.run_id, effect.batch)
            case _:
                assert_never(effect)


def _stored_trace(store: Store, run_id: str) -> str | None:
    """The trace context stored with the Run's activation (None from a store that keeps
    none: a test double, an older store's Runs)."""
    read: Callable[[str], str | None] | None = getattr(store, "trace_context", None)
    return None if read is None else read(run_id)


__all__ = ["StoreOps"]
