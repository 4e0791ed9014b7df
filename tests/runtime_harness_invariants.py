"""The invariants of the stateful test's machine (``runtime_harness.py``): after every
step, I1-I15 and each tool's policies are judged from what the store and the World say,
never from what a runtime believed; each commit is judged once, when first seen, so a
step costs what it added, not the history (teardown re-reads every log and judges the
export as a whole).
"""

from __future__ import annotations

import collections

from hypothesis.stateful import invariant

from runkernel.adapters.stores.serial import commit_text, inbox_to_input, resume_from_json
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import Deny, EndRequest
from runkernel.kernel.recover import recover
from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallExecuting,
    CallIndeterminate,
    Ended,
    RunSnapshot,
    ThreadCommit,
    is_terminal,
)
from runkernel.kernel.values import IndeterminateReason, Role
from runkernel.testing.simulation.contents import check_contents
from runkernel.specs.checker import Verdict, check_commits, check_lines
from runtime_harness_hooks import CONTEXT_MARK
from runtime_harness_state import CHILD_CANCELLED, RuntimeMachineState
from runtime_harness_world import PAST


def parents_first(logs: dict[str, list[ThreadCommit]]) -> list[str]:
    """Thread ids, those of child Runs (whose first commit names a parent) last."""
    return sorted(logs, key=lambda t: bool(logs[t]) and logs[t][0].parent is not None)


class RuntimeInvariants(RuntimeMachineState):
    """The checks run after every step."""

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def committed_facts_hold(self) -> None:
        logs = self.read_logs()
        snapshots = self.snapshots()
        self.discover_children(snapshots)
        self.parents_down(snapshots)
        problems = list(self.problems)
        changed = [t for t, log in logs.items() if len(log) != len(self.judged.get(t, ()))]
        problems += self.check_logs(logs)
        problems += self.check_acknowledged(logs)
        problems += self.check_executions()
        problems += self.check_recoveries()
        problems += self.check_ended(snapshots)
        problems += self.check_cancels()
        problems += self.check_commands(logs)
        # a Thread's messages judged once stay true (what was answered only grows); the
        # children's Threads come along for the termini their parents' results name
        problems += check_contents(self.world, {t: logs[t] for t in logs if t in changed or self.is_child(logs[t])})
        for run_id, snapshot in snapshots.items():
            if self.recovered.get(run_id) == snapshot.version:
                continue  # judged at this version already: recover() is a function of it
            self.recovered[run_id] = snapshot.version
            problems += self.ledger.staged_problems(run_id, snapshot.staged)
            if recover(snapshot, self.registry.policies) != recover(snapshot, self.registry.policies):
                problems.append(f"I11 recover() of {run_id} v{snapshot.version} is not deterministic")
            again = self.store.run(run_id)
            if again is None or recover(again, self.registry.policies) != recover(snapshot, self.registry.policies):
                problems.append(f"I11 recover() of {run_id} differs between two reads of the same state")
        self.broken = bool(problems)
        assert not problems, "\n".join(problems)

    def read_logs(self) -> dict[str, list[ThreadCommit]]:
        """Every Thread's log: read from the store where its head moved, and everywhere
        after a failed write (which must have left nothing behind); elsewhere the commits
        already judged stand for it (teardown reads every log and compares)."""
        everything = self.write_failures != self.failures_seen
        self.failures_seen = self.write_failures
        logs = {}
        for thread_id in self.store.thread_ids():
            judged = self.judged.get(thread_id, [])
            head = self.store.thread_head(thread_id)
            if not everything and head is not None and head.version == len(judged):
                logs[thread_id] = judged[:]
            else:
                logs[thread_id] = list(self.store.commits(thread_id))
        return logs

    def check_logs(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        """I1-I8, I13 and I15 with the trace checker on the exported lines of every
        Thread, parents and children together; what each new commit says about staged
        hooks and delegations (the ledger); no ticket twice.

        Same verdicts as ``check_commits`` on every commit in the order the store took
        them, but incremental: one judge is fed only the commits it has not seen (its
        state depends on nothing else); if a Thread's judged commits changed, every
        Thread is judged again from scratch to say where. What is exported (and that no
        request-only context is in it) is judged once per example, at teardown."""
        problems = []
        order = parents_first(logs)
        for thread_id in order:
            log, judged = logs[thread_id], self.judged.get(thread_id, [])
            if log[: len(judged)] != judged:
                finding = check_commits(c for t in order for c in logs[t])
                where = f"commit {finding.line}: {finding.rule}: {finding.message}"
                if finding.verdict is Verdict.LEGAL:
                    where = "its judged commits changed"
                return [f"I1-I8/I12/I13/I15 {thread_id} {where}"]
        hooks = self.hooks if self.hooks_on else None
        for thread_id, version in self.appended[self.fed :]:
            log = logs.get(thread_id, [])
            if version > len(log):
                problems.append(f"I12 {thread_id} v{version} was appended and is gone")
                break
            commit = log[version - 1]
            rejection = self.trace.feed(commit)
            if rejection is not None:
                problems.append(f"I1-I8/I13/I15 {thread_id} v{version}: {rejection}")
                break
            problems += self.ledger.feed(commit, hooks)
            problems += self.policy_problems(commit)
            self.count_results(commit)
            if isinstance(commit.disposition, Awaiting):
                ticket_id = commit.disposition.ticket.ticket_id
                self.tickets[ticket_id] += 1
                if self.tickets[ticket_id] > 1:
                    problems.append(f"I14 ticket {ticket_id} was committed {self.tickets[ticket_id]} times")
            self.judged.setdefault(thread_id, []).append(commit)
            self.fed += 1
        problems += [
            f"{thread_id} holds {len(log)} commits, {len(self.judged.get(thread_id, []))} of them appended"
            for thread_id, log in logs.items()
            if len(log) != len(self.judged.get(thread_id, [])) and not problems
        ]
        return problems

    def check_export(self) -> None:
        """Every log is what was judged; every Thread's export (the lines ``runkernel
        export`` writes), parents first, is judged together as ``check-trace`` judges a
        file (once per example: teardown)."""
        logs = {t: list(self.store.commits(t)) for t in self.store.thread_ids()}
        changed = [t for t, log in logs.items() if log[: len(self.judged.get(t, ()))] != self.judged.get(t, [])]
        assert not changed, f"I12 judged commits of {changed} changed or vanished"
        # the store's commits, encoded as export_lines encodes them, without reading twice
        lines = [commit_text(c).encode("utf-8") for t in parents_first(logs) for c in logs[t]]
        if not lines:
            return
        assert not any(CONTEXT_MARK.encode("utf-8") in line for line in lines), "request-only context exported"
        finding = check_lines(lines)
        assert finding.verdict is Verdict.LEGAL, finding.report("export")

    def check_acknowledged(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        """Each acknowledged commit is the stored one (checked once: ``check_logs``
        finds any later change to a judged commit); an Ended Run keeps no checkpoint."""
        problems = []
        for commit in self.acknowledged[self.acked :]:
            log = logs.get(commit.thread_id, [])
            stored = log[commit.version - 1] if commit.version <= len(log) else None
            if stored != commit:
                problems.append(f"I12 acknowledged {commit.thread_id} v{commit.version} changed or vanished")
            if isinstance(commit.disposition, Ended):
                self.acknowledged_ends.add(commit.run_id)
        self.acked = len(self.acknowledged)
        for run_id in self.acknowledged_ends:
            if self.store.load_checkpoint(run_id) is not None:
                problems.append(f"I10 run {run_id} ended but its stream checkpoint is still there")
        return problems

    def check_executions(self) -> list[str]:
        problems = []
        runs: collections.Counter[tuple[str, int]] = collections.Counter()
        for execution in self.world.executions:
            runs[(execution.operation_id, execution.attempt)] += 1
            if not execution.committed_first:
                problems.append(
                    f"I5 {execution.operation_id} ({execution.tool}) attempt {execution.attempt} "
                    "started before Executing was committed"
                )
        problems += [f"I6 {op} attempt {attempt} ran {n} times" for (op, attempt), n in runs.items() if n > 1]
        return problems

    def policy_problems(self, commit: ThreadCommit) -> list[str]:
        """Each tool's fixed policies, judged from each new commit (the trace checker
        cannot: it knows no policies). Executing{n} -> Executing{n+1} is a retry (with an
        ``attempt_failed`` event, within the retry policy), a replay (replay tools only,
        within max_attempts) or a reconnect whose status said not_found; nothing else
        (I9). attempts_exhausted is only for replay tools that ran out."""
        if commit.batch is None:
            return []
        problems = []
        policies = self.registry.policies
        failed = {(e.data.get("call_id"), e.data.get("attempt")) for e in commit.events if e.type == "attempt_failed"}
        for call in commit.batch.calls:
            key = (commit.thread_id, commit.batch.batch_id, call.call_id)
            before, status = self.policy_statuses.get(key), call.status
            self.policy_statuses[key] = status
            if before == status:
                continue
            policy = policies.for_tool(call.tool)
            mode = policy.recovery.mode
            where = f"{commit.thread_id} v{commit.version} {call.operation_id} ({call.tool})"
            if isinstance(before, CallExecuting) and isinstance(status, CallExecuting):
                n = before.attempt
                if (call.call_id, n) in failed:
                    if status.attempt > policy.retry.max_attempts:
                        problems.append(f"retry policy: {where} retried to attempt {status.attempt}")
                elif mode is RecoveryMode.REPLAY:
                    if status.attempt > policy.recovery.max_attempts:
                        problems.append(f"replay policy: {where} replayed to attempt {status.attempt}")
                elif mode is RecoveryMode.INDETERMINATE or call.operation_id not in self.world.not_found_answered:
                    problems.append(
                        f"I9 {where}: Executing{{{n}}} started again under {mode.value} (no retry, no not_found status)"
                    )
            if isinstance(status, CallIndeterminate) and status.reason is IndeterminateReason.ATTEMPTS_EXHAUSTED:
                if mode is not RecoveryMode.REPLAY or status.attempt < policy.recovery.max_attempts:
                    problems.append(f"replay policy: {where} exhausted at attempt {status.attempt}")
        return problems

    def count_results(self, commit: ThreadCommit) -> None:
        """Tool uses and tool results of each Run, from each new commit (``check_ended``)."""
        for message in commit.messages:
            if message.role is Role.ASSISTANT and message.tool_calls:
                self.uses.setdefault(commit.run_id, collections.Counter()).update(u.call_id for u in message.tool_calls)
            if message.role is Role.TOOL and message.call_id is not None:
                self.results.setdefault(commit.run_id, collections.Counter())[message.call_id] += 1

    def check_recoveries(self) -> list[str]:
        problems = []
        policies = self.registry.policies
        for snapshot, executed_before in self.recoveries:
            batch = snapshot.open_batch
            for call in batch.calls if batch else ():
                if not isinstance(call.status, CallExecuting):
                    continue
                mode = policies.for_tool(call.tool).recovery.mode
                if mode is RecoveryMode.REPLAY or call.operation_id in self.world.not_found_answered:
                    continue
                if any(e.operation_id == call.operation_id for e in self.world.executions[executed_before:]):
                    problems.append(
                        f"I9 {call.operation_id} ({call.tool}, {mode.value}) ran again after recovery "
                        f"found it Executing{{{call.status.attempt}}}"
                    )
        return problems

    def check_ended(self, snapshots: dict[str, RunSnapshot]) -> list[str]:
        problems = []
        for run_id, first in self.ended.items():
            if snapshots.get(run_id) != first:
                problems.append(f"I4 run {run_id} was Ended and then changed: {snapshots.get(run_id)}")
        for run_id, snapshot in snapshots.items():
            uses = self.uses.get(run_id, collections.Counter())
            results = self.results.get(run_id, collections.Counter())
            problems += [f"I13 {run_id}: call {c} has {n} tool results" for c, n in results.items() if n > 1]
            problems += [f"I13 {run_id}: result for unknown call {c}" for c in results if c not in uses]
            if not isinstance(snapshot.state, Ended) or run_id in self.ended:
                continue
            self.ended[run_id] = snapshot
            problems += [f"I13 {run_id} Ended: call {c} has no tool result" for c in uses if results[c] != 1]
            batch = snapshot.batch
            if batch is not None and (not batch.finalized or not all(is_terminal(c.status) for c in batch.calls)):
                problems.append(f"I13 {run_id} Ended with an open batch: {batch}")
        return problems

    def check_cancels(self) -> list[str]:
        """A parent that ends while children run sends each of them a cancel once its
        drive has carried out the end's effects. A drive that died or was set aside
        after the end commit (or before acknowledging it) lost them: that is the known
        runtime bug of ``test_a_crash_after_the_parents_end_commit_still_cancels_its_running_children``,
        so those children are left alone."""
        problems, due = [], []
        for parent, child in self.ledger.cancel_due:
            snapshot = self.store.run(child)
            if snapshot is None or isinstance(snapshot.state, Ended):
                continue
            drive = self.ending.get(parent)
            if drive is not None and drive.outcome is None and drive is self.live():
                due.append((parent, child))  # still carrying out the end's effects
                continue
            if drive is None or drive.outcome is None:
                continue
            sent = False
            for entry in self.store.pending_commands(child):
                try:
                    sent = sent or isinstance(inbox_to_input(entry.body), EndRequest)
                except TraceFormatError:
                    continue
            if not sent:
                problems.append(f"child {child} of {parent}, which ended while it ran, was sent no cancel")
            else:
                self.note(CHILD_CANCELLED)
        self.ledger.cancel_due = due
        return problems

    def check_commands(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        problems = []
        resumed: collections.Counter[str] = collections.Counter()
        for log in logs.values():
            for commit in log:
                for event in commit.events:
                    if event.type != RESUMED_EVENT:
                        continue
                    digest = str(event.data.get("digest"))
                    resumed[digest] += 1
                    try:
                        command = resume_from_json(event.data.get("command"))
                    except TraceFormatError as error:
                        problems.append(f"I14 resumed event with an unreadable command: {error}")
                        continue
                    if command.digest() != digest:
                        problems.append(f"I14 resumed event digest does not match its command: {event.data}")
                    if digest in self.bad_digests:
                        problems.append(f"I14 a wrong command was committed: {event.data}")
                    elif digest not in self.valid_digests and command.payload != Deny({"expired_at": PAST}):
                        problems.append(f"I14 a command nobody sent was committed: {event.data}")
        problems += [f"I14 command {d} committed {n} times" for d, n in resumed.items() if n > 1]
        problems += [f"I14 applied resume {d} is not committed" for d in self.applied_resumes if resumed[d] != 1]
        problems += self.check_settled_with_commit(resumed)
        return problems

    def check_settled_with_commit(self, resumed: collections.Counter[str]) -> list[str]:
        """A committed resume's inbox entry is settled "applied" by that very commit (one
        transaction), so at no instant, crashes included, is it committed but unsettled."""
        settled_by_commit = set()
        for entry_id, digest in self.valid_entries.items():
            entry = self.store.inbox_entry(entry_id)
            if entry is not None and entry.state == "settled" and entry.outcome == "applied":
                settled_by_commit.add(digest)
        return [
            f"I14 resume {digest} is committed but no inbox entry of it is settled 'applied'"
            for digest in set(self.valid_entries.values())
            if resumed[digest] and digest not in settled_by_commit
        ]

    def teardown(self) -> None:
        try:
            if not self.broken:  # a failing example is reported as it failed
                self.check_export()
        finally:
            super().teardown()
