"""The store's judge: the verdict on a kernel-made commit, reached by the edge ``decide``
named, and on any other commit by ``validate_commit`` in full.

``decide`` (through ``planning.build_commit``) names the edge of the commits it makes
most: a text step, a new batch, one call of the open batch taking one Tool-call edge
(``ThreadCommit.edge``, a ``NamedEdge``). A commit read from a trace, a foreign
runtime's commit, or any commit without a claim has no name and is judged in full.

Why this shorter path is sound. It only ever *accepts*; it never rejects:

- every check it runs is a check the full judge runs on that commit's branch, mostly by
  the very same helper (``check_thread``, ``check_new_batch``, ``check_call_move``,
  ``check_disposition_shape``, ``same_batch``, ``same_call``);
- the checks it leaves out are made vacuous by conditions it verifies first, and any of
  those conditions that does not hold (a claim naming the wrong edge or the wrong call,
  a second call that moved, a message of the wrong role, a delegation, a resume) sends
  the commit to the full judge, as does every ``Illegal`` a shared helper raises;
- so a commit is accepted here only if the full judge accepts it too, and a rejection,
  its rule and its message, is always the full judge's own. The accepted state and the
  history keys are what ``successor`` and ``commit_keys`` give for a plain Running step
  (no resume event, no ticket), built directly (``_successor``, ``_keys``).

What is skipped, per edge (each line: the full judge's check, and why it cannot fail
once the listed conditions hold):

- every edge: the Run edge, the resume and Awaiting-end checks and the ticket checks
  (prev and commit are both exactly ``Running``, no ``resumed`` event); the child-once
  rule (no ``parent``); the fork rule (no ``forked_from``); the app-version rule (no
  ``app_version``).
- ``TEXT_STEP``: the step and inference checks (exactly one assistant message, no tool
  use, step + 1, no open batch); publication (no tool message).
- ``NEW_BATCH``: as ``TEXT_STEP``, with the new batch judged by ``check_new_batch``.
- ``CALL_MOVE``: ``check_order`` and ``check_group_moves`` (every call before the named
  one terminal, every call after it Requested, and neither the named call nor its
  former self a group member (a terminal-only delegation, or a call whose committed
  policy says ``concurrent``: a group's moves, I8 amended, always go to the full judge),
  so no group span has a member leaving Requested), the
  per-call checks of the calls that did not move (equal to their committed selves as
  JSON, carrying no delegation, and a Requested one no reaction), and the disposition
  shape (no call is left Awaiting).

``tests/kernel/test_named_edge.py`` gives both paths the same commits (the random kernel
driver's, every catalogued trace mutation under the claim of the commit it mutates,
and commits with deliberately wrong claims) and requires the same verdict.
"""

from __future__ import annotations

from typing import assert_never

from runkernel.kernel.history import NO_HISTORY, NO_KEYS, History, HistoryKeys
from runkernel.kernel.state import (
    RESUMED_EVENT,
    ActiveToolBatch,
    CallAwaiting,
    CallRequested,
    EdgeKind,
    Running,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.validate import (
    Accepted,
    TicketSeen,
    check_new_batch,
    check_thread,
    validate_commit,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.validate_calls import (
    Illegal,
    check_call_move,
    check_disposition_shape,
    is_group_member,
    same_batch,
    same_call,
    same_json,
    same_status,
)
from runkernel.kernel.values import Role


def judge_commit(
    head: ThreadHead | None,
    run: RunSnapshot | None,
    commit: ThreadCommit,
    history: History = NO_HISTORY,
    *,
    ticket_seen: TicketSeen,
) -> Accepted | Rejection:
    """``validate_commit``'s verdict on ``commit`` (same arguments), reached by the edge
    the commit names when the commit is that edge, else by the full judge."""
    if commit.edge is not None and run is not None:
        accepted = by_named_edge(head, run, commit, history)
        if accepted is not None:
            return accepted
    return validate_commit(head, run, commit, history, ticket_seen=ticket_seen)


def by_named_edge(
    head: ThreadHead | None, prev: RunSnapshot, commit: ThreadCommit, history: History
) -> Accepted | None:
    """The acceptance of ``commit`` by its named edge, or None when the commit is not
    that edge (or anything is in doubt): then only the full judge may decide."""
    claim = commit.edge
    if claim is None or not _plain_running_step(prev, commit):
        return None
    prev_open = prev.open_batch  # read once: a property, asked by every step below
    try:
        new_head = check_thread(head, prev, commit)
        if claim.kind is EdgeKind.CALL_MOVE:
            confirmed = _is_call_move(prev, prev_open, commit, claim.call)
        elif claim.kind is EdgeKind.TEXT_STEP:
            confirmed = prev_open is None and _is_text_step(prev, commit)
        elif claim.kind is EdgeKind.NEW_BATCH:
            confirmed = prev_open is None and _is_new_batch(prev, commit, history)
        else:
            assert_never(claim.kind)
    except Illegal:
        return None  # the full judge reports it, under its own rule and message
    if not confirmed:
        return None
    return Accepted(head=new_head, run=_successor(prev, prev_open, commit), keys=_keys(prev_open, commit))


def _successor(prev: RunSnapshot, prev_open: ActiveToolBatch | None, commit: ThreadCommit) -> RunSnapshot:
    """``successor(prev, commit)`` for a plain Running step (no resume event, so no
    input answer to add), built directly: this path runs on every kernel-made commit."""
    return RunSnapshot(
        prev.thread_id,
        prev.run_id,
        commit.version,
        commit.step,
        commit.disposition,
        commit.batch,
        prev.provided_inputs if prev_open is not None else (),
        commit.staged.value if commit.staged is not None else prev.staged,
    )


def _keys(prev_open: ActiveToolBatch | None, commit: ThreadCommit) -> HistoryKeys:
    """``commit_keys(prev, commit)`` for a plain Running step: no ticket (Running), no
    resume (no resume event), so only the batch it finalizes, if it closes the open one."""
    batch = commit.batch
    if batch is not None and batch.finalized and prev_open is not None:
        return HistoryKeys(closed_batch=batch.batch_id)
    return NO_KEYS


def _plain_running_step(prev: RunSnapshot, commit: ThreadCommit) -> bool:
    """Running stays Running, no parent named, no fork source, no app version, no resume
    carried."""
    if (
        commit.parent is not None
        or commit.forked_from is not None
        or commit.app_version is not None
        or type(prev.state) is not Running
        or type(commit.disposition) is not Running
    ):
        return False
    for event in commit.events:
        if event.type == RESUMED_EVENT:
            return False
    return True


def _one_inference(prev: RunSnapshot, commit: ThreadCommit, *, with_tools: bool) -> bool:
    """Exactly one assistant message (with or without a tool-use block) and the next
    step (the caller has seen that no batch was open before it)."""
    messages = commit.messages
    if commit.step != prev.step + 1 or len(messages) != 1:
        return False
    message = messages[0]
    return message.role is Role.ASSISTANT and bool(message.tool_calls) is with_tools


def _is_text_step(prev: RunSnapshot, commit: ThreadCommit) -> bool:
    if not _one_inference(prev, commit, with_tools=False):
        return False
    batch, carried = commit.batch, prev.batch
    if batch is not None:
        # only the finalized batch may be carried, and only unchanged
        if carried is None or batch.batch_id != carried.batch_id or not same_batch(batch, carried):
            return False
        check_disposition_shape(prev, commit)
    return True


def _is_new_batch(prev: RunSnapshot, commit: ThreadCommit, history: History) -> bool:
    if not _one_inference(prev, commit, with_tools=True):
        return False
    batch, before = commit.batch, prev.batch
    if batch is None or (before is not None and before.batch_id == batch.batch_id):
        return False
    check_new_batch(commit, commit.messages, history)
    check_disposition_shape(prev, commit)
    return True


def _is_call_move(prev: RunSnapshot, before: ActiveToolBatch | None, commit: ThreadCommit, index: int) -> bool:
    batch = commit.batch
    if before is None or batch is None or commit.step != prev.step:
        return False
    old_calls, calls = before.calls, batch.calls
    if (
        batch.batch_id != before.batch_id
        or batch.step != before.step
        or len(calls) != len(old_calls)
        or not 0 <= index < len(calls)
    ):
        return False
    for position, (old, new) in enumerate(zip(old_calls, calls)) if len(calls) > 1 else ():
        if position < index:
            if not is_terminal(new.status) or not _unchanged(old, new):
                return False
        elif position > index:
            if type(new.status) is not CallRequested or new.reaction is not None or not _unchanged(old, new):
                return False
    old, new = old_calls[index], calls[index]
    if (
        is_group_member(old)
        or is_group_member(new)
        or isinstance(new.status, CallAwaiting)
        or not same_call(new, old)
        or same_status(old.status, new.status)
    ):
        return False
    check_call_move(old, new, ending=False, resuming=False)  # its status changed: checked above
    messages = commit.messages
    if not batch.finalized:
        return not messages
    # finalized: every call terminal, one tool result per call in call order
    if index != len(calls) - 1 or not is_terminal(new.status) or len(messages) != len(calls):
        return False
    for message, call in zip(messages, calls):
        if message.role is not Role.TOOL or message.call_id != call.call_id:
            return False
    return True


def _unchanged(old: ToolCall, new: ToolCall) -> bool:
    """The call is its committed self, as JSON too (1 is not true), and no delegation."""
    return (
        new == old
        and new.delegation is None
        and same_call(new, old)
        and same_status(old.status, new.status)
        and same_json(old.reaction, new.reaction)
    )
