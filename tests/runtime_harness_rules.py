"""The rules of the stateful test's machine (``runtime_harness.py``): start Runs, drive
them effect by effect, crash, fail writes, recover, and send resumes and end requests.
"""

from __future__ import annotations

import contextlib

from collections.abc import Callable

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from history_facts import logged_history

from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.stores.contract import AnswerPending
from runkernel.adapters.stores.serial import end_to_inbox, resume_from_json, resume_to_inbox
from runkernel.kernel.delegation import executing_delegations
from runkernel.kernel.policies import IndeterminateChoice
from runkernel.kernel.protocol import Approve, Deny, EndRequest, ResumeCommand, ResumePayload
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import RESUMED_EVENT, Awaiting, CallExecuting, EndCause, Ended, Message, RunSnapshot
from runkernel.kernel.values import AWAITING_END_CAUSES, Role, WaitKind
from runkernel.testing import Boundary, StepScript
from runtime_harness_scripts import (
    BOUNDARIES,
    COMMANDS,
    END_CAUSES,
    PAYLOAD_FOR_WAIT,
    SCRIPTS,
    choose,
    valid_payload,
    wrong_payload,
)
from runtime_harness_state import RuntimeMachineState
from runtime_harness_world import REACH, build_registry


class RuntimeRules(RuntimeMachineState):
    """What the machine does at each step. Every rule is always applicable and does
    nothing when it cannot act (see ``runtime_harness.py``)."""

    # --- rules -------------------------------------------------------------------------

    @initialize(
        max_steps=st.sampled_from([None, 3]),
        choice=st.sampled_from(IndeterminateChoice),
        hooks=st.sampled_from([True, True, False]),
        script=SCRIPTS,
    )
    def configure(
        self, max_steps: int | None, choice: IndeterminateChoice, hooks: bool, script: tuple[StepScript, ...]
    ) -> None:
        """Host policies and hooks (staging, reacting, or none) for the whole example, and
        a first Run (not driven yet)."""
        self.registry = build_registry(self.world, max_steps, choice)
        self.hooks_on = hooks
        self.start_run(False, 0, script)

    @rule(same_thread=st.booleans(), pick=st.integers(0, 7), script=SCRIPTS)
    def start_another_run(self, same_thread: bool, pick: int, script: tuple[StepScript, ...]) -> None:
        """A new Run, in a new Thread or one whose Runs have all Ended.

        The worker first finishes what it is driving (up to its next stop)."""
        self.run_to_stop()
        self.start_run(same_thread, pick, script)

    def start_run(self, same_thread: bool, pick: int, script: tuple[StepScript, ...]) -> None:
        self.drive = None
        reusable = []
        for thread_id in self.threads:
            head = self.store.thread_head(thread_id)
            if head is None or head.active_run_id is None:
                reusable.append(thread_id)
        n = next(self.serial)
        if same_thread and reusable:
            thread_id = reusable[pick % len(reusable)]
        else:
            thread_id = f"thread-{n}"
            self.threads.append(thread_id)
        run_id = f"run-{n}"
        self.runs.append(run_id)
        self.scripts[run_id] = script
        self.starts[run_id] = (thread_id, (Message(Role.USER, f"task {n}"),))
        self.drive = self.runtime().begin_start(thread_id, run_id, self.starts[run_id][1])

    @rule()
    def advance(self) -> None:
        """Carry out the current drive's next effect."""
        self.step_drive()

    @rule(effects=st.sampled_from([3, REACH]))
    def advance_further(self, effects: int) -> None:
        """Carry out the current drive's next few effects, or drive it up to its stop.

        With no live drive, a worker first picks up the Run that most needs work (one
        with pending commands, a call found Executing, or Running) with a fresh runtime,
        as a polling worker would."""
        if self.live() is None:
            candidates = self.needing_work()
            if not candidates:
                return
            self.revive(candidates[0])
        for _ in range(effects):
            if self.step_drive():
                return

    def run_to_stop(self) -> None:
        for _ in range(REACH):
            if self.step_drive():
                return

    @rule(boundary=BOUNDARIES, skip=st.integers(0, 2), pick=st.integers(0, 7))
    def crash_at_boundary(self, boundary: Boundary, skip: int, pick: int) -> None:
        """Arm a crash at the next boundary of this kind (any position), or at a later
        one after ``skip`` of that kind went by, and drive into it.

        With no live drive, a fresh runtime continues a Run that needs work (so crashes
        also hit recoveries). The runtime that reaches the boundary dies and its drive is
        discarded; if the drive stops first, the crash stays armed for whichever drive
        reaches such a boundary next."""
        fired = len(self.crash.fired)
        self.crash.arm(boundary, skip)
        self.drive_into_trouble(pick, lambda: len(self.crash.fired) > fired)

    @rule(pick=st.integers(0, 7))
    def fail_next_append(self, pick: int) -> None:
        """The store refuses the next append (of whichever drive makes it next): the
        drive that meets the failure dies like a crash."""
        failures = self.write_failures
        self.fail_appends(True)
        self.drive_into_trouble(pick, lambda: self.write_failures > failures)

    def drive_into_trouble(self, pick: int, happened: Callable[[], bool]) -> None:
        """Drive the live drive, or fresh runtimes for Runs that need work (up to three
        drives), until the armed trouble ``happened``."""
        for attempt in range(3):
            if self.live() is None:
                candidates = self.needing_work()
                if not candidates:
                    return
                self.revive(candidates[(pick if attempt == 0 else 0) % len(candidates)])
            self.run_to_stop()
            if happened():
                return

    @rule(pick=st.integers(0, 7))
    def recover(self, pick: int) -> None:
        """A fresh runtime continues a Run from the store alone, up to its next stop.

        A live drive dies first (its process is killed between two effects) and its Run
        is the one continued; otherwise a Run that needs work, Ended ones last. A Run
        whose activation never committed is started again, as a host would."""
        live = self.live()
        run_id = live.run_id if live is not None else self.pick_to_drive(pick)
        if run_id is None:
            return
        self.drive = None
        self.revive(run_id)
        self.run_to_stop()

    @rule()
    def toggle_checkpoint_failures(self) -> None:
        self.fail_checkpoints(not self.checkpoints_failing())

    @rule(pick=st.integers(0, 7), commands=COMMANDS, choice=st.integers(0, 3))
    def resume(self, pick: int, commands: list[tuple[str, bool]], choice: int) -> None:
        """Resumes for one Run, each through ``submit_resume`` or straight into its inbox.

        ``valid``: the committed ticket, wait kind and a payload of its type; it must be
        accepted (I14). Every other kind must be refused and never committed: a forged
        ticket, the wrong wait kind or payload type, another run's id, a repeat of an
        applied command ("already applied") or a different one for its ticket ("stale").
        A valid resume for a Run that is not Awaiting comes too late: refused as well."""
        snapshot = self.pick_run(pick)
        if snapshot is None:
            return
        for kind, via_inbox in commands:
            self.send_resume(snapshot, kind, choice, via_inbox)

    def send_resume(self, snapshot: RunSnapshot, kind: str, choice: int, via_inbox: bool) -> None:
        awaiting = snapshot.state.ticket if isinstance(snapshot.state, Awaiting) else None
        if kind == "valid" and awaiting is not None:
            command = ResumeCommand(
                snapshot.run_id, awaiting.ticket_id, awaiting.wait, valid_payload(awaiting.wait, choice)
            )
            self.valid_digests.add(command.digest())
            if via_inbox:
                try:
                    entry_id = self.store.put_command(snapshot.run_id, resume_to_inbox(command))
                except AnswerPending:
                    return  # a wait takes one answer: the pending one stands, nothing queued
                self.valid_entries[entry_id] = command.digest()
                return
            result = submit_resume(self.store, command)
            if isinstance(result, Rejection):
                if not (result.rule is Rule.STALE_COMMAND and result.message.startswith("already answered by command")):
                    self.problems.append(f"I14 a resume matching the committed ticket was refused: {result}")
            else:
                self.valid_entries[result] = command.digest()
            return
        made = self.bad_resume(snapshot, kind, choice)
        if made is None:
            return
        command, expected = made
        if kind != "repeat":
            self.bad_digests.add(command.digest())
        if via_inbox:
            # skipping pre-validation: the runtime that drives the Run must refuse it (unless
            # its ticket has an answer pending: a wait takes one, so nothing is queued)
            with contextlib.suppress(AnswerPending):
                self.store.put_command(snapshot.run_id, resume_to_inbox(command))
            return
        before = self.versions()
        self.expect_refused(f"{kind} resume", submit_resume(self.store, command), expected, before)

    def bad_resume(self, snapshot: RunSnapshot, kind: str, choice: int) -> tuple[ResumeCommand, set[Rule] | None] | None:
        """A resume of ``kind`` that must be refused, and the rules it may be refused by."""
        run_id = snapshot.run_id
        awaiting = snapshot.state.ticket if isinstance(snapshot.state, Awaiting) else None
        applied = logged_history(self.store, run_id).resumes
        if kind in ("repeat", "stale"):
            if not applied:
                return None
            original = self.find_resume(snapshot.thread_id, applied[choice % len(applied)].digest)
            if original is None:
                self.problems.append(f"I14 applied resume of {run_id} has no resumed event in the log")
                return None
            if kind == "repeat":
                return original, {Rule.ALREADY_APPLIED}
            changed = Deny("changed my mind")
            other: ResumePayload = changed if original.payload != changed else Approve()
            return ResumeCommand(run_id, original.ticket_id, original.kind, other), {Rule.STALE_COMMAND}
        if awaiting is None:
            return self.late_resume(snapshot, choice)
        if kind == "forged":
            forged = f"tk_forged_{next(self.serial)}_{'x' * 24}"
            return ResumeCommand(run_id, forged, awaiting.wait, PAYLOAD_FOR_WAIT[awaiting.wait]), {Rule.TICKET_MISMATCH}
        if kind == "wrong_kind":
            other_kind = next(k for k in WaitKind if k is not awaiting.wait)
            command = ResumeCommand(run_id, awaiting.ticket_id, other_kind, PAYLOAD_FOR_WAIT[other_kind])
            return command, {Rule.WAIT_KIND_MISMATCH}
        if kind == "wrong_payload":
            command = ResumeCommand(run_id, awaiting.ticket_id, awaiting.wait, wrong_payload(awaiting.wait))
            return command, {Rule.PAYLOAD_TYPE}
        # other_run: the right ticket and payload, addressed to another Run (or to none)
        others = [r for r in self.snapshots() if r != run_id]
        other_run = others[choice % len(others)] if others and choice % 2 else "run-nobody"
        command = ResumeCommand(other_run, awaiting.ticket_id, awaiting.wait, PAYLOAD_FOR_WAIT[awaiting.wait])
        # in this Run's inbox: refused as for another run; through submit_resume: judged
        # against the other Run, whose tickets differ
        return command, {Rule.WRONG_RUN} if other_run == "run-nobody" else None

    def late_resume(self, snapshot: RunSnapshot, choice: int) -> tuple[ResumeCommand, set[Rule] | None] | None:
        """A resume for a ticket of a Run that no longer (or never) waits on it."""
        facts = logged_history(self.store, snapshot.run_id)
        used = sorted(facts.tickets)
        ticket_id = used[choice % len(used)] if used else f"tk_never_issued_{'x' * 24}"
        wait = WaitKind.APPROVAL
        for commit in self.store.commits(snapshot.thread_id):
            if isinstance(commit.disposition, Awaiting) and commit.disposition.ticket.ticket_id == ticket_id:
                wait = commit.disposition.ticket.wait
        command = ResumeCommand(snapshot.run_id, ticket_id, wait, valid_payload(wait, choice))
        if any(a.digest == command.digest() for a in facts.resumes):
            return None  # exactly the applied command: a repeat, not a late one
        return command, None

    def find_resume(self, thread_id: str, digest: str) -> ResumeCommand | None:
        for commit in self.store.commits(thread_id):
            for event in commit.events:
                if event.type == RESUMED_EVENT and event.data.get("digest") == digest:
                    return resume_from_json(event.data.get("command"))
        return None

    @rule(pick=st.integers(0, 7), cause=st.sampled_from(END_CAUSES), via_inbox=st.booleans())
    def end(self, pick: int, cause: EndCause, via_inbox: bool) -> None:
        """Cancel, stop, fail (or complete) a Run through submit_end or the raw inbox."""
        snapshot = self.pick_run(pick)
        if snapshot is None:
            return
        self.send_end(snapshot, cause, via_inbox)

    @rule(pick=st.integers(0, 7), cause=st.sampled_from(END_CAUSES[:3]), drive=st.booleans())
    def end_parent(self, pick: int, cause: EndCause, drive: bool) -> None:
        """Cancel, stop or fail a parent while its children run; with ``drive``, a
        worker applies it at once (the children are sent a cancel), otherwise whoever
        drives the parent next does, perhaps after some children ended."""
        parents = [
            (0 if self.delegating_rank(s) == 2 else 1, s)
            for s in self.snapshots().values()
            if s.open_batch is not None and executing_delegations(s.open_batch)
        ]
        snapshot = choose(parents, pick)
        if snapshot is None:
            return
        self.send_end(snapshot, cause, via_inbox=False)
        if drive:
            self.drive = None  # a live drive of another Run is set aside (its process dies)
            self.revive(snapshot.run_id)
            self.run_to_stop()

    @rule(pick=st.integers(0, 7))
    def drive_child(self, pick: int) -> None:
        """A worker drives a child Run up to its stop while its parent is down (a live
        drive dies first): mostly a child whose parent's call still waits for it."""
        ranked = []
        snapshots = self.snapshots()
        for child, (parent, call_id) in self.children.items():
            snapshot = snapshots.get(child)
            if snapshot is None or isinstance(snapshot.state, Ended):
                continue
            owner = snapshots.get(parent)
            batch = owner.open_batch if owner is not None else None
            call = batch.call(call_id) if batch is not None else None
            ranked.append((0 if call is not None and isinstance(call.status, CallExecuting) else 1, child))
        run_id = choose(ranked, pick)
        if run_id is None:
            return
        self.drive = None
        self.revive(run_id)
        self.run_to_stop()

    def send_end(self, snapshot: RunSnapshot, cause: EndCause, via_inbox: bool) -> None:
        request = EndRequest(cause)
        if via_inbox:
            self.store.put_command(snapshot.run_id, end_to_inbox(request))
            return
        before = self.versions()
        result = submit_end(self.store, snapshot.run_id, request)
        if isinstance(snapshot.state, Ended):
            self.expect_refused("end of an Ended run", result, {Rule.RUN_ENDED}, before)
        elif isinstance(snapshot.state, Awaiting) and cause.kind not in AWAITING_END_CAUSES:
            self.expect_refused(f"{cause.kind.value} of an Awaiting run", result, {Rule.AWAITING_END}, before)
        elif isinstance(result, Rejection):
            self.problems.append(f"I14 {cause.kind.value} of a {type(snapshot.state).__name__} run refused: {result}")
