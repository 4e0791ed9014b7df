"""Judging a fork's first commit (a ThreadCommit with ``forked_from``).

Two cases (DESIGN.md, Forks; ``check-trace`` documents both):

- **alone** (``check_fork_first``): the commit is an activation that carries history. Its
  messages are history (any roles, results published before N included); it is Running
  or Awaiting, names no parent, carries no resume; its step counts at most the assistant
  messages it carries; a batch it carries is either finalized with every call terminal,
  or open, of the fork's step, holding exactly the last tool-use message's calls in order
  with no result published after it; no call's attempt started (``started_in_source``:
  none is Executing, none Awaiting a wait its own tool asked for, so a fork never carries
  an attempt that may be running or that its tool expects to go on); Awaiting only with its one Awaiting call and the ticket
  that call waits on (the ticket never used before: ``validate_commit`` asks the store).
- **matched** (``check_fork_against``): with the source's state at the version named,
  the fork carries the same step and staged state (messages are compared by the caller,
  who holds them) and its batch is the source's open batch under the fork rules
  (``runkernel.kernel.fork``): terminal calls kept as they were; every other call under
  a new operation id; a started call (``started_in_source``) under replay Requested
  again; one under another policy closed Indeterminate(outcome_unknown) with its attempt;
  a call Awaiting before it started (a gate's wait) Awaiting on a new ticket.
"""

from __future__ import annotations

from runkernel.kernel.edges import call_phase
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallExecuting,
    CallStatus,
    CallIndeterminate,
    CallRequested,
    Running,
    RunSnapshot,
    ThreadCommit,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.validate_calls import (
    Illegal,
    check_delegation,
    check_reaction,
    check_waits_with_run,
    require,
    same_batch,
    same_json,
    same_status,
)
from runkernel.kernel.values import IndeterminateReason, Role


def check_fork_first(commit: ThreadCommit) -> None:
    """Raise ``Illegal`` unless the fork's first commit is legal judged alone."""
    require(
        isinstance(commit.disposition, (Running, Awaiting)),
        Rule.FORK,
        lambda: f"fork run {commit.run_id!r} must start Running or Awaiting",
    )
    require(commit.parent is None, Rule.FORK, "a fork's first commit names no parent (it is not a child activation)")
    require(
        all(e.type != "resumed" for e in commit.events),
        Rule.RESUME,
        "a first commit cannot carry a resume",
    )
    assistants = [i for i, m in enumerate(commit.messages) if m.role is Role.ASSISTANT]
    require(
        commit.step <= len(assistants),
        Rule.STEP,
        lambda: f"a fork carries step {commit.step} with {len(assistants)} assistant message(s) of history",
    )
    batch = commit.batch
    if batch is not None:
        _check_carried_batch(commit, batch, assistants[-1] if assistants else None)
    check_waits_with_run(commit)


def started_in_source(status: CallStatus) -> bool:
    """Whether a call's attempt had started: Executing, or Awaiting on a wait its own tool
    asked for (a scheduled run, a delegation: ``attempt`` > 0). A fork carries no such
    attempt: under replay the call runs again as the fork's own, under any other policy
    it refuses the fork or is closed Indeterminate (the tool's effect may have happened)."""
    return isinstance(status, CallExecuting) or (isinstance(status, CallAwaiting) and status.attempt > 0)


def _check_carried_batch(commit: ThreadCommit, batch: ActiveToolBatch, last: int | None) -> None:
    for call in batch.calls:
        require(
            not started_in_source(call.status),
            Rule.FORK,
            lambda: f"call {call.call_id!r} is {call_phase(call.status).value} with a started attempt in a fork's "
            "first commit: a fork never carries an attempt that started (replay: Requested again; "
            "otherwise Indeterminate)",
        )
        check_reaction(None, call)
        if call.delegation is not None:
            require(
                is_terminal(call.status),
                Rule.DELEGATION_FIXED,
                lambda: f"call {call.call_id!r} carries a delegation while {call_phase(call.status).value}",
            )
        else:
            check_delegation(None, call)
    if batch.finalized:
        require(
            batch.all_terminal(),
            Rule.FINALIZE,
            lambda: f"batch {batch.batch_id!r} is finalized with a call that is not terminal",
        )
        return
    require(
        batch.step == commit.step,
        Rule.FORK,
        lambda: f"the open batch {batch.batch_id!r} says step {batch.step}, the fork is at step {commit.step}",
    )
    uses = commit.messages[last].tool_calls if last is not None else None
    require(
        uses is not None
        and [(u.call_id, u.tool) for u in uses] == [(c.call_id, c.tool) for c in batch.calls]
        and all(same_json(u.arguments, c.arguments) for u, c in zip(uses, batch.calls)),
        Rule.FORK,
        lambda: f"the open batch {batch.batch_id!r} does not hold exactly the last tool-use message's calls",
    )
    assert last is not None
    require(
        all(m.role is not Role.TOOL for m in commit.messages[last + 1 :]),
        Rule.PUBLISH,
        lambda: f"a result of open batch {batch.batch_id!r} is published before it is finalized",
    )


def check_fork_against(source: RunSnapshot, commit: ThreadCommit) -> Rejection | None:
    """The fork's first commit against its source's snapshot at the version it names
    (messages excepted: the caller compares them). None when it matches."""
    try:
        _match(source, commit)
    except Illegal as illegal:
        return illegal.rejection
    return None


def _match(source: RunSnapshot, commit: ThreadCommit) -> None:
    forked = commit.forked_from
    require(
        forked is not None and forked.run_id == source.run_id and forked.version == source.version,
        Rule.FORK,
        lambda: f"the fork names {forked!r}, the source state is run {source.run_id!r} at version {source.version}",
    )
    require(
        commit.step == source.step,
        Rule.FORK,
        lambda: f"the fork is at step {commit.step}, its source at step {source.step}",
    )
    staged = commit.staged.value if commit.staged is not None else None
    require(same_json(staged, source.staged), Rule.FORK, "the fork's staged state is not its source's")
    waited = isinstance(source.state, Awaiting) and _waits_unstarted(source)
    require(
        isinstance(commit.disposition, Awaiting) == waited,
        Rule.FORK,
        "a fork waits if and only if its source waited at that version on a call that had not started",
    )
    batch = source.open_batch
    if batch is None:
        carried = commit.batch
        require(
            carried is None or (source.batch is not None and same_batch(carried, source.batch)),
            Rule.FORK,
            "the source had no open batch at that version; the fork carries one",
        )
        return
    fork = commit.batch
    require(
        fork is not None
        and fork.batch_id == batch.batch_id
        and fork.step == batch.step
        and not fork.finalized
        and len(fork.calls) == len(batch.calls),
        Rule.FORK,
        lambda: f"the fork does not carry the source's open batch {batch.batch_id!r}",
    )
    assert fork is not None
    for old, new in zip(batch.calls, fork.calls):
        _match_call(old, new)


def _match_call(old: ToolCall, new: ToolCall) -> None:
    require(
        new.call_id == old.call_id
        and new.tool == old.tool
        and same_json(new.arguments, old.arguments)
        and new.policy == old.policy,
        Rule.FORK,
        lambda: f"call {new.call_id!r} is not the source's call {old.call_id!r}",
    )
    status = old.status
    if is_terminal(status):
        require(
            new.operation_id == old.operation_id
            and same_status(new.status, status)
            and same_json(new.reaction, old.reaction)
            and new.delegation == old.delegation,
            Rule.FORK,
            lambda: f"call {old.call_id!r} is terminal at the source: the fork keeps its result and operation id",
        )
        return
    replay = old.policy is not None and old.policy.recovery.mode is RecoveryMode.REPLAY
    if started_in_source(status) and not replay:
        require(
            new.status == CallIndeterminate(status.attempt, IndeterminateReason.OUTCOME_UNKNOWN)
            and new.operation_id == old.operation_id,
            Rule.FORK,
            lambda: f"call {old.call_id!r} started under a policy that never reruns it: a fork closes it "
            "Indeterminate(outcome_unknown) with its attempt and operation id, or is refused",
        )
        return
    require(
        new.operation_id != old.operation_id,
        Rule.FORK,
        lambda: f"call {old.call_id!r} is not terminal at the source: the fork runs it under a new operation id, "
        f"not {old.operation_id!r}",
    )
    if isinstance(status, CallAwaiting) and not started_in_source(status):
        moved = new.status
        require(
            isinstance(moved, CallAwaiting)
            and moved.attempt == status.attempt
            and moved.wait.kind is status.wait.kind
            and moved.wait.correlation != status.wait.correlation,
            Rule.FORK,
            lambda: f"call {old.call_id!r} waits at the source: the fork waits on it with a new ticket",
        )
        return
    require(
        isinstance(new.status, CallRequested),
        Rule.FORK,
        lambda: f"call {old.call_id!r} is {call_phase(status).value} at the source: the fork carries it Requested",
    )


def _waits_unstarted(source: RunSnapshot) -> bool:
    """Whether the source's ticket names a call that had not started (a gate's wait)."""
    assert isinstance(source.state, Awaiting)
    batch = source.open_batch
    call = batch.call(source.state.ticket.call_id) if batch is not None else None
    return call is not None and not started_in_source(call.status)
