"""What each rule means, in a sentence or two, and what it keeps: the invariants
(I1–I15 of the kernel, W1–W6 of workers and leases) and the section of ``docs/spec.md``
whose table it checks. ``tools/reference_docs.py`` writes ``docs/reference/rules.md``
from these tables; a rule without a note fails that generator.
"""

from __future__ import annotations

import re

from attrs import frozen

from runkernel.kernel.rules import Rule

#: The invariants, in the project's words: what the judge, the stores, recovery and the
#: workers keep, whatever crashes.
INVARIANTS: dict[str, str] = {
    "I1": "Every committed transition is an edge of the Run machine or the Tool-call machine, "
    "under the conditions its table states.",
    "I2": "An Awaiting Run carries exactly one ticket, and it names the one call that waits; "
    "a Running or Ended Run carries none.",
    "I3": "A Thread's versions go 1, 2, 3, … with no gap, and every commit names the Thread, "
    "the Run and the version it follows.",
    "I4": "Nothing is committed for a Run after it ended; a Run starts Running (there is no "
    "Created state); at most one Run of a Thread is not Ended.",
    "I5": "A tool's attempt n starts only after the commit that moves its call to "
    "Executing{n}; a wait begins only after the commit that moves the Run to Awaiting.",
    "I6": "A call's attempts go 0 (Requested), then 1, 2, … by exactly one.",
    "I7": "A committed terminal result (and the reaction committed with it) never changes.",
    "I8": "The model is asked only when no batch is open; results are published in call "
    "order; ordinary calls start one at a time, in order, each once every earlier call is "
    "terminal; only the members of a group of concurrent delegations run together (the "
    "commit that ends a Run closes every open call at once).",
    "I9": "A call that recovery finds Executing{n} under a policy other than replay never "
    "has its tool started again (unless reconnect learns it never started).",
    "I10": "A stream checkpoint never changes committed state.",
    "I11": "Recovery is a pure function of committed state: the same state, the same decision.",
    "I12": "Whatever the crash point, acknowledged commits are never changed or lost, I1–I11 "
    "hold, and the history differs from a crash-free one only by recovery edges.",
    "I13": "An Ended Run has no open batch: every call terminal, the batch finalized, one "
    "result per call published.",
    "I14": "An answer to a wait commits only while its Run is Awaiting, for the committed "
    "ticket, of its wait kind and payload type, taking an edge its payload allows; a "
    "ticket id is never used twice.",
    "I15": "A delegated child Run is activated at most once, for the call that fixed it, and "
    "the parent's result for a concurrent delegation is the child's committed terminus.",
    "W1": "A tool's attempt starts only in the worker whose Executing commit won, while its "
    "lease is valid; a worker that wakes after losing its lease starts nothing.",
    "W2": "A Run whose worker died is taken over within its lease's expiry plus one poll.",
    "W3": "At most one lease of a Run is valid at any instant of the store's clock.",
    "W4": "A commit whose acknowledgement was lost (the connection dropped after COMMIT) is "
    "recognized on retry by its identity, version and writer: adopted if it is the "
    "worker's own, a conflict if another's, never written twice.",
    "W5": "The lease epoch reaches the downstream system before the Run moves past a call "
    "the worker may have touched (a reconnect's status call, a tool's fence), so a stalled "
    "worker's late start can be refused there.",
    "W6": "Workers ride out their store: a database restart or a dropped connection is a "
    "line when it starts and one when it ends, and driving resumes with nothing "
    "acknowledged lost.",
}

#: The sections of ``docs/spec.md`` a rule's note links to.
RUN_MACHINE = "run-state-machine"
CALL_MACHINE = "tool-call-state-machine"
CONCURRENCY = "concurrency-rule"


@frozen
class RuleNote:
    """A rule explained: ``text`` (a sentence or two), the invariants it keeps and the
    ``docs/spec.md`` section whose table it checks ("" when none does)."""

    text: str
    invariants: tuple[str, ...] = ()
    spec: str = ""


RULE_NOTES: dict[Rule, RuleNote] = {
    Rule.IDENTITY: RuleNote(
        "A commit belongs to the Thread and the Run it names: a Run's commits keep its Thread.",
        ("I3",), RUN_MACHINE),
    Rule.VERSION: RuleNote(
        "A Thread's first commit is version 1 and each next one the version after the last; "
        "a gap or a repeat is refused (the same file judged twice repeats its versions).",
        ("I3",)),
    Rule.FIRST_COMMIT: RuleNote(
        "A Run's first commit is its activation: Running, at step 0, or at step 1 with the "
        "first model answer; there is no edge into Awaiting or Ended from nothing.",
        ("I1", "I4"), RUN_MACHINE),
    Rule.ONE_ACTIVE_RUN: RuleNote(
        "A Thread runs one Run at a time: a new Run starts only after the last one ended.",
        ("I4",)),
    Rule.APP_VERSION: RuleNote(
        "A Run's app version is recorded once, beside its app, on its activation: no later "
        "commit carries one, so the code a Run belongs to never changes in its log.",
        ("I4",), RUN_MACHINE),
    Rule.AFTER_ENDED: RuleNote("Ended is final: nothing is committed for a Run after it.", ("I4",), RUN_MACHINE),
    Rule.STEP: RuleNote(
        "`step` counts the model's answers: a commit carries at most one, and raises the "
        "step by exactly the number it carries.", ("I1",)),
    Rule.RUN_EDGE: RuleNote("The Run's state moves only along an edge of the Run machine.", ("I1",), RUN_MACHINE),
    Rule.TICKET_SHAPE: RuleNote(
        "An Awaiting Run's ticket names the call that waits, with that call's wait kind, and "
        "its id is the call's wait correlation.", ("I2",), RUN_MACHINE),
    Rule.TICKET_REUSED: RuleNote(
        "A ticket id is used once: no Run, of any Thread, in any of the files judged together, "
        "waits on a ticket id used before (a Run judged alone is held to its own history).",
        ("I14",)),
    Rule.RESUME: RuleNote(
        "The commit that moves Awaiting to Running carries exactly one `resumed` event naming "
        "the committed ticket and its call, with its command and digest; no other commit "
        "carries one.", ("I14",), RUN_MACHINE),
    Rule.RESUME_PAYLOAD: RuleNote(
        "The resume's command is of the ticket's wait kind, with a payload that kind takes, "
        "in normal form and within I-JSON.", ("I14",)),
    Rule.RESUME_DIGEST: RuleNote(
        "The resume's digest is the SHA-256 of its command's RFC 8785 canonical form, which any "
        "language can recompute.", ("I14",)),
    Rule.RESUME_EDGE: RuleNote(
        "The resume moves its call along the edge its payload allows: an approval or an input "
        "to Executing, a deny or an external answer to Completed with the payload's value.",
        ("I14", "I1"), CALL_MACHINE),
    Rule.AWAITING_END: RuleNote(
        "An Awaiting Run ends only by cancel, stop or failure: it cannot complete while a "
        "call waits.", ("I1",), RUN_MACHINE),
    Rule.CALL_EDGE: RuleNote("A call's status moves only along an edge of the Tool-call machine.", ("I1",), CALL_MACHINE),
    Rule.EDGE_CONDITION: RuleNote(
        "The edge a call takes meets its row's conditions: the waits, results and reasons it "
        "allows, and the commits it needs (the Run's end, a resume).", ("I1",), CALL_MACHINE),
    Rule.ATTEMPT: RuleNote(
        "A call's attempt is 0 until it first executes, 1 on its first Executing commit, and "
        "goes up by exactly one per retry or resume; other edges keep it.", ("I6",), CALL_MACHINE),
    Rule.EXECUTING_FIRST: RuleNote(
        "A tool runs only after its call's Executing commit: a call that reaches a tool's "
        "result, a higher attempt or an unknown outcome without that commit skipped it.",
        ("I5",), CALL_MACHINE),
    Rule.BATCH_NEW: RuleNote(
        "A model answer that asks for tools is committed with its complete batch: every call "
        "of its tool-use block, in order, each Requested, not yet finalized.", ("I1",), CALL_MACHINE),
    Rule.BATCH_IDENTITY: RuleNote(
        "Once committed, a batch keeps its id, step and calls: no call's id, tool, arguments, "
        "operation id or policy changes, and a finalized batch is carried only unchanged; the "
        "message names the field that changed.", ("I7", "I1")),
    Rule.CALL_ORDER: RuleNote(
        "Ordinary calls progress one at a time, in call order: a call leaves Requested only "
        "when every earlier call is terminal. Only the members of one group (terminal-only "
        "delegations, or calls whose committed policy says `concurrent`) progress together.", ("I8",), CONCURRENCY),
    Rule.INFERENCE_OPEN_BATCH: RuleNote(
        "The model is asked again only once the batch is finalized.", ("I8",)),
    Rule.FINALIZE: RuleNote("A batch is finalized only when every call of it is terminal.", ("I13",), CALL_MACHINE),
    Rule.PUBLISH: RuleNote(
        "The commit that finalizes a batch carries exactly one tool message per call, in call "
        "order, naming the call; no other commit carries tool messages.", ("I8", "I13")),
    Rule.RUN_END_CLOSES: RuleNote(
        "The commit that ends a Run closes its open batch: every call terminal, the batch "
        "finalized, its results published.", ("I13",), CALL_MACHINE),
    Rule.TERMINAL_IMMUTABLE: RuleNote(
        "A completed or indeterminate call's result and reaction never change.", ("I7",), CALL_MACHINE),
    Rule.CALL_WAITS_WITH_RUN: RuleNote(
        "A call waits only while its Run is Awaiting on its ticket, and an Awaiting Run has "
        "exactly one waiting call.", ("I2",), RUN_MACHINE),
    Rule.FORK: RuleNote(
        "A fork's first commit carries its source's messages, staged state and step at the "
        "version it names, and no call that may be running: judged alone, no call Executing and "
        "an open batch matching the last tool-use message; matched against the source, every "
        "terminal call kept, every other call under a new operation id and a waiting one on a "
        "new ticket, and an Executing call that may not run again closed Indeterminate.",
        ("I1", "I9", "I14")),
    Rule.DELEGATION_FIXED: RuleNote(
        "A delegation's child is fixed by its call's Executing commit and never changes; the "
        "child is activated only after that commit, and only the child it names (checked "
        "across files too).", ("I5", "I15"), CONCURRENCY),
    Rule.CHILD_ONCE: RuleNote(
        "A child Run is activated once, for one call; only its activation names its parent.",
        ("I15",), CONCURRENCY),
    Rule.CHILD_TERMINUS: RuleNote(
        "A concurrent delegation completes with exactly its child's committed terminus, and "
        "only once the child has ended.", ("I15",), CONCURRENCY),
    Rule.GROUP_GATE: RuleNote(
        "A group (of concurrent delegations, or of concurrent ordinary calls) is gated before "
        "it starts: its allowed members start together in one commit, and none waits or starts "
        "while another runs.",
        ("I8",), CONCURRENCY),
    Rule.RUN_NOT_AWAITING: RuleNote("An answer to a wait is refused while the Run does not wait.", ("I14",), RUN_MACHINE),
    Rule.TICKET_MISMATCH: RuleNote("An answer names the ticket the Run waits on, or it is refused.", ("I14",)),
    Rule.WAIT_KIND_MISMATCH: RuleNote("An answer is of the wait kind its ticket waits for.", ("I14",)),
    Rule.PAYLOAD_TYPE: RuleNote("An answer's payload is one the ticket's wait kind takes.", ("I14",)),
    Rule.ALREADY_APPLIED: RuleNote(
        "The same answer sent again after it was applied is refused, so a retried command "
        "changes nothing.", ("I14",)),
    Rule.STALE_COMMAND: RuleNote(
        "An answer to a ticket another answer already settled is refused.", ("I14",)),
    Rule.RUN_ENDED: RuleNote("Nothing is applied to an Ended Run.", ("I4",), RUN_MACHINE),
    Rule.WRONG_RUN: RuleNote("A command names the Run it is sent to.", ("I14",)),
    Rule.UNEXPECTED_INPUT: RuleNote(
        "An input the Run's state does not expect (a model answer while a call waits) is refused.",
        ("I1",)),
    Rule.NOT_EXPIRED: RuleNote("A deadline ends a wait only if the wait has one and it has passed.", ("I14",)),
    Rule.JSON_VALUE: RuleNote("Every committed value is JSON a trace can carry exactly."),
}


def invariants_named(text: str) -> set[str]:
    """The invariant ids a text mentions (``I15``, ``W4``), defined or not."""
    return set(re.findall(r"\b([IW]\d{1,2})\b", text))
