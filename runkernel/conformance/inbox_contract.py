"""The store contract's inbox, as pytest tests: what ``StoreContract`` (``suite``)
inherits. Commands are kept until settled, oldest first; a commit settles the command
it applies only while that command is pending (a command settled already keeps its
first outcome); compaction deletes a Run's settled refusals and nothing else; and a
wait takes one answer: ``put_command`` refuses a second pending answer for a ticket with
``AnswerPending`` naming the first (``answered_ticket``, the one-answer rule).
"""

from __future__ import annotations

import pytest

from runkernel.adapters.stores.contract import AnswerPending, Settlement, Store
from runkernel.adapters.stores.serial import resume_to_inbox
from runkernel.conformance.runs import awaiting_run, text_run
from runkernel.kernel.protocol import Approve, Deny, ResumeCommand
from runkernel.kernel.values import JsonValue, WaitKind

CANCEL: JsonValue = {"type": "end", "kind": "cancelled"}


def answered_wait(store: Store, ticket_id: str) -> tuple[int, JsonValue, JsonValue]:
    """Run r1 of Thread t1 committed to ``store``, waiting for approval under
    ``ticket_id``, and its first answer (approve) queued: that command's id, and two
    answers to the same wait as inbox bodies, approve and deny."""
    commits, _ = awaiting_run("t1", "r1", ticket_id)
    for commit in commits:
        store.append(commit)
    approve = resume_to_inbox(ResumeCommand("r1", ticket_id, WaitKind.APPROVAL, Approve()))
    deny = resume_to_inbox(ResumeCommand("r1", ticket_id, WaitKind.APPROVAL, Deny("not now")))
    return store.put_command("r1", approve), approve, deny


def refused_as_pending(store: Store, run_id: str, body: JsonValue, first: int, ticket_id: str) -> None:
    """``put_command(run_id, body)`` must raise ``AnswerPending(first, ticket_id)``."""
    try:
        queued = store.put_command(run_id, body)
    except AnswerPending as refused:
        assert (refused.entry_id, refused.ticket_id) == (first, ticket_id), (
            f"AnswerPending names command {refused.entry_id} and ticket {refused.ticket_id!r}, "
            f"not the pending answer {first} to {ticket_id!r}"
        )
    else:
        pytest.fail(
            f"a second answer to ticket {ticket_id!r} was queued (command {queued}) while command {first} "
            "answers it: put_command must raise AnswerPending (the one-answer rule, answered_ticket)"
        )


class InboxContract:
    """The inbox tests; ``store`` is ``StoreContract``'s fixture."""

    def test_inbox_keeps_commands_until_settled(self, store: Store) -> None:
        first = store.put_command("r1", CANCEL)
        second = store.put_command("r1", {"type": "end", "kind": "stopped"})
        store.put_command("r2", CANCEL)
        pending = store.pending_commands("r1")
        assert [e.entry_id for e in pending] == [first, second]
        assert pending[0].body == CANCEL
        store.settle_command(first, "applied")
        assert [e.entry_id for e in store.pending_commands("r1")] == [second]
        settled = store.inbox_entry(first)
        assert settled is not None and (settled.state, settled.outcome) == ("settled", "applied")
        assert store.inbox_entry(999) is None

    def test_a_commit_settles_only_a_command_still_pending(self, store: Store) -> None:
        commits = text_run("t1", "r1", 4)
        applied = store.put_command("r1", CANCEL)
        store.append(commits[0], Settlement(applied, "applied at 1"))
        store.append(commits[1], Settlement(applied, "applied at 2"))  # settled already: the commit alone lands
        kept = store.inbox_entry(applied)
        assert kept is not None and (kept.state, kept.outcome) == ("settled", "applied at 1"), (
            f"a commit settling a command already settled rewrote it: {kept}; a commit settles "
            "its command only while it is pending (Store.append)"
        )
        refused = store.put_command("r1", CANCEL)
        store.settle_command(refused, "refused: for this test")
        store.append(commits[2], Settlement(refused, "applied at 3"))
        kept = store.inbox_entry(refused)
        assert kept is not None and kept.outcome == "refused: for this test", (
            f"a commit turned a refused command into an applied one: {kept}"
        )
        store.append(commits[3], Settlement(refused + 100, "applied at 4"))  # no such command: nothing to settle
        assert store.inbox_entry(refused + 100) is None, "settling a command that does not exist made one"
        assert [c.version for c in store.commits("t1")] == [1, 2, 3, 4], "a commit whose command was settled was lost"
        assert store.pending_commands("r1") == []

    def test_compaction_deletes_only_the_runs_settled_refusals(self, store: Store) -> None:
        pending = store.put_command("r1", CANCEL)
        applied = store.put_command("r1", CANCEL)
        store.settle_command(applied, "applied")
        refusals = [store.put_command("r1", CANCEL) for _ in range(2)]
        store.settle_command(refusals[0], "refused: the Run is not awaiting")
        store.settle_command(refusals[1], "refused: malformed command")
        elsewhere = store.put_command("r2", CANCEL)
        store.settle_command(elsewhere, "refused: the Run is not awaiting")
        deleted = store.compact_commands("r1")
        kept = [e.entry_id for e in store.commands("r1")]
        assert kept == [pending, applied], (
            f"compaction kept commands {kept}, not {[pending, applied]}: it deletes the Run's settled "
            "refusals only, never a pending or an applied command"
        )
        assert deleted == 2, f"compaction deleted 2 refusals but returned {deleted}"
        assert [e.entry_id for e in store.pending_commands("r1")] == [pending]
        assert store.inbox_entry(elsewhere) is not None, "compacting r1 deleted a refusal of another Run"
        assert store.compact_commands("r1") == 0, "compacting again found refusals to delete"

    def test_a_wait_takes_one_pending_answer(self, store: Store) -> None:
        first, approve, deny = answered_wait(store, "ticket-answer-0001")
        refused_as_pending(store, "r1", deny, first, "ticket-answer-0001")
        refused_as_pending(store, "r1", approve, first, "ticket-answer-0001")  # the same answer again too
        other = store.put_command("r1", CANCEL)  # not an answer: no ticket, never refused
        assert [e.entry_id for e in store.pending_commands("r1")] == [first, other], "a refused answer was queued"
        store.settle_command(first, "refused: for this test")
        again = store.put_command("r1", deny)  # the first answer is settled: the wait takes another
        assert again > other, f"entry ids must rise: {again} after {other}"


__all__ = ["InboxContract"]
