"""Forks: a new Thread and Run from a source Thread's committed state at version N.

Pure, like the rest of the kernel: the source's commits come in (``fork_point`` folds
them up to N), fresh ids come in (``ForkIds``: the kernel takes no randomness), and out
comes the fork's first ThreadCommit or a typed refusal. The rules (DESIGN.md, Forks):

- the fork's first commit holds the Thread's messages and the Run's staged state at N,
  its step, and ``forked_from`` (source thread, Run, version); the source is never changed;
- calls published before N are history (they live in the messages);
- in the batch open at N: a terminal call keeps its result and its operation id; a
  Requested call stays Requested with a new operation id; an Executing call under replay
  becomes the fork's own call, Requested with a new operation id (its attempts count
  from 1 again); an Executing call under reconnect or indeterminate (or without a
  committed policy) refuses the fork, naming the calls, unless ``abandon_open_calls``:
  then it is closed Indeterminate(outcome_unknown) in the fork, keeping the source's
  attempt and operation id (the one its outcome is reconciled by), and never runs;
- a call Awaiting before it started (a gate's wait: approval, input, external) starts the
  fork Awaiting on a new ticket (I14: a ticket is never reused) and a new operation id;
- a call Awaiting a wait its own tool asked for (a scheduled run, a sequential
  delegation: its attempt started) is a started call, as if Executing: under replay the
  fork runs it again as its own call (a delegation gets a new child, never the source's),
  under any other policy it refuses the fork or is abandoned. ``started_in_source``
  (``runkernel.kernel.validate_fork``) is the one definition both sides use;
- a batch already finalized at N is history: the fork starts without a batch. A Run
  Ended at N forks into a Running Run that goes on from its messages.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import attrs
from attrs import frozen

from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    ForkedFrom,
    Message,
    ResumeTicket,
    Running,
    RunSnapshot,
    Staged,
    ThreadCommit,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.validate import successor
from runkernel.kernel.validate_fork import started_in_source
from runkernel.kernel.values import IndeterminateReason


@frozen
class ForkPoint:
    """The source's committed state at version ``version`` of its Thread: the Thread's
    messages up to it, the snapshot of the Run that committed it, and that Run's first
    commit (its ``app`` travels to the fork)."""

    thread_id: str
    version: int
    messages: tuple[Message, ...]
    run: RunSnapshot
    first: ThreadCommit

    @property
    def run_id(self) -> str:
        return self.run.run_id


@frozen
class ForkIds:
    """The fresh ids a fork takes: its Thread and Run, one new operation id per call of
    the batch open at N (``operation_ids``, used in call order by the calls that need
    one; extra ones are ignored) and the ticket an Awaiting fork waits on."""

    thread_id: str
    run_id: str
    operation_ids: Sequence[str]
    ticket_id: str


class ForkRefusalKind(enum.Enum):
    """Why a fork is refused."""

    #: the source Thread has no commit at that version
    NO_SUCH_VERSION = "no-such-version"
    #: the version is a commit of another Run of the Thread
    OTHER_RUN = "other-run"
    #: a call Executing at that version is under reconnect or indeterminate
    OPEN_CALLS = "open-calls"
    #: the fresh ids given are not fresh (too few, repeated, the source's own)
    IDS = "ids"
    #: the Thread named for the fork already has commits (a store's answer, not the kernel's)
    THREAD_TAKEN = "thread-taken"


@frozen
class ForkRefusal:
    """A typed refusal: no fork is made. ``calls`` names the calls that refuse it."""

    kind: ForkRefusalKind
    message: str
    calls: tuple[str, ...] = ()

    @property
    def rule(self) -> ForkRefusalKind:
        """The kind, under the name every refusal carried by an error has."""
        return self.kind

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


def fork_point(commits: Iterable[ThreadCommit], run_id: str, at: int) -> ForkPoint | ForkRefusal:
    """Fold the source Thread's commits (oldest first) up to version ``at``: the state a
    fork of ``run_id`` at ``at`` starts from, or a refusal when ``at`` is not one of that
    Run's versions. Reads the Thread once, up to ``at``; nothing after it."""
    messages: list[Message] = []
    run: RunSnapshot | None = None
    first: ThreadCommit | None = None
    owner: ThreadCommit | None = None  # the commit at version ``at``
    for commit in commits:
        if commit.version > at:
            break
        messages.extend(commit.messages)
        if commit.run_id == run_id:
            run = successor(run, commit)
            first = commit if first is None else first
        if commit.version == at:
            owner = commit
    if owner is None:
        return ForkRefusal(ForkRefusalKind.NO_SUCH_VERSION, f"run {run_id!r} has no commit at version {at}")
    if owner.run_id != run_id or run is None or first is None:
        return ForkRefusal(
            ForkRefusalKind.OTHER_RUN,
            f"version {at} of thread {owner.thread_id!r} is a commit of run {owner.run_id!r}, not of run {run_id!r}",
        )
    thread_id = owner.thread_id
    return ForkPoint(thread_id, at, tuple(messages), run, first)


def fork_commit(
    source: ForkPoint, ids: ForkIds, *, abandon_open_calls: bool = False
) -> ThreadCommit | ForkRefusal:
    """The fork's first commit (version 1 of ``ids.thread_id``), or why there is none."""
    run = source.run
    if isinstance(run.state, Awaiting) and ids.ticket_id in ("", run.state.ticket.ticket_id):
        return ForkRefusal(ForkRefusalKind.IDS, "the fork's ticket id must be new (I14: a ticket is never reused)")
    batch = run.open_batch
    if batch is not None:
        blocked = tuple(c.call_id for c in batch.calls if _never_rerun(c))
        if blocked and not abandon_open_calls:
            return ForkRefusal(
                ForkRefusalKind.OPEN_CALLS,
                f"call(s) {', '.join(blocked)} of run {run.run_id!r} had started at version {source.version} "
                "(Executing, or waiting on a run their tool asked for) under a policy that never reruns them (reconnect or indeterminate); a fork would start them "
                "again (abandon them, --abandon-open-calls or abandon_open_calls=True, to close them Indeterminate in the fork)",
                blocked,
            )
        carried = _carry_batch(batch, ids)
        if isinstance(carried, ForkRefusal):
            return carried
    else:
        carried = None
    disposition: Running | Awaiting = Running()
    if isinstance(run.state, Awaiting) and carried is not None:
        ticket = run.state.ticket
        waiting = carried.call(ticket.call_id)
        if waiting is not None and isinstance(waiting.status, CallAwaiting):
            disposition = Awaiting(ResumeTicket(ids.ticket_id, ticket.wait, ticket.call_id))
    return ThreadCommit(
        thread_id=ids.thread_id,
        run_id=ids.run_id,
        expected_version=0,
        step=run.step,
        disposition=disposition,
        batch=carried,
        messages=source.messages,
        app=source.first.app,
        app_version=source.first.app_version,
        staged=Staged(run.staged) if run.staged is not None else None,
        forked_from=ForkedFrom(source.thread_id, run.run_id, source.version),
    )


def _never_rerun(call: ToolCall) -> bool:
    """A started call whose committed policy never reruns it (no policy: the same)."""
    if not started_in_source(call.status):
        return False
    return call.policy is None or call.policy.recovery.mode is not RecoveryMode.REPLAY


def _carry_batch(batch: ActiveToolBatch, ids: ForkIds) -> ActiveToolBatch | ForkRefusal:
    fresh = iter(ids.operation_ids)
    taken = {c.operation_id for c in batch.calls}
    calls: list[ToolCall] = []
    for call in batch.calls:
        status = call.status
        if is_terminal(status):
            calls.append(call)
            continue
        if _never_rerun(call):
            assert isinstance(status, (CallExecuting, CallAwaiting))
            calls.append(call.with_status(CallIndeterminate(status.attempt, IndeterminateReason.OUTCOME_UNKNOWN)))
            continue
        operation_id = next(fresh, "")
        if operation_id == "" or operation_id in taken:
            return ForkRefusal(
                ForkRefusalKind.IDS,
                f"call {call.call_id!r} needs a fresh operation id (given: {operation_id!r})",
                (call.call_id,),
            )
        taken.add(operation_id)
        if isinstance(status, CallAwaiting) and not started_in_source(status):
            wait = attrs.evolve(status.wait, correlation=ids.ticket_id)
            new_status: CallAwaiting | CallRequested = CallAwaiting(status.attempt, wait)
        else:  # Requested, or started under replay: the fork's own call, from attempt 1
            new_status = CallRequested()
        calls.append(ToolCall(call.call_id, call.tool, call.arguments, operation_id, new_status, call.policy))
    return ActiveToolBatch(batch.batch_id, batch.step, False, tuple(calls))
