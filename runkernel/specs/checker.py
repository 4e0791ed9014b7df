"""``check-trace``: judge a ``runkernel/2`` trace line by line with the kernel.

There is no second rule set here: every line is decoded to a ThreadCommit and handed
to ``validate_commit`` against the previous committed state of its Thread. Input is
read a bounded line at a time, so a hostile file costs at most one line of memory
(``trace_lines``: bounded lines, strict JSON).

Several files judged in one call are one trace split over files (``check_files``): one
judge sees them all, in the order given, so a ticket id is used once across all of them
and a child Run is checked against its parent in another file; each file still gets its
own finding.

A fork's first line is judged alone, and against its source when that is in the trace
too (``fork_judge.py``).

Why this module is long: one judge's state (heads, Runs, histories, tickets) and the
cross-Thread delegation checks that read it live together.
"""

from __future__ import annotations

import enum
import hashlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import attrs
from attrs import frozen

from runkernel.errors import NotATrace as NotATrace
from runkernel.specs.fork_judge import STDIN, ForkJudge, file_fork_points, fork_points
from runkernel.specs.trace_lines import bounded_lines, parse_line
from runkernel.kernel.codec import IllegalShape, TraceFormatError, commit_from_json
from runkernel.kernel.history import NO_HISTORY, NO_KEYS, HistoryKeys
from runkernel.kernel.delegation import terminus
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    Awaiting,
    CallCompleted,
    Ended,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    is_concurrent_delegation,
)
from runkernel.kernel.validate_calls import same_json
from runkernel.kernel.validate import validate_commit
from runkernel.kernel.values import JsonValue, Role

NOT_A_TRACE = "not-a-trace"


class Verdict(enum.IntEnum):
    """Exit codes of ``check-trace``: the highest over several files wins."""

    LEGAL = 0
    ILLEGAL = 1
    NOT_A_TRACE = 2


@frozen
class Finding:
    """The outcome for one file: the first illegal or unreadable line, if any."""

    verdict: Verdict
    line: int = 0
    rule: str = ""
    message: str = ""
    commits: int = 0
    threads: int = 0

    def report(self, name: str) -> str:
        if self.verdict is Verdict.LEGAL:
            return f"{name}: legal: {self.commits} commits in {self.threads} threads"
        where = f"{name}:{self.line}" if self.line else name
        return f"{where}: {self.rule}: {self.message}"


#: Ids up to this many characters are kept as they are; longer ones by their SHA-256,
#: so that what the judge keeps per ticket and batch id has a fixed size.
KEY_CHARS = 64

Key = str | bytes


def compact_key(text: str) -> Key:
    """A fixed-size stand-in for an id: itself when short, else its SHA-256 digest
    (bytes, which never equal a str, so a short id cannot collide with a long one)."""
    if len(text) <= KEY_CHARS:
        return text
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class KeyedHistory:
    """One open Run's history by compact keys: what the judge asks of it later."""

    __slots__ = ("tickets", "closed_batches", "resumes")

    def __init__(self) -> None:
        self.tickets: set[Key] = set()
        self.closed_batches: set[Key] = set()
        self.resumes: dict[Key, str] = {}

    def ticket_used(self, ticket_id: str) -> bool:
        return compact_key(ticket_id) in self.tickets

    def batch_closed(self, batch_id: str) -> bool:
        return compact_key(batch_id) in self.closed_batches

    def applied_digest(self, ticket_id: str) -> str | None:
        return self.resumes.get(compact_key(ticket_id))

    def add(self, keys: HistoryKeys) -> None:
        if keys.ticket is not None:
            self.tickets.add(compact_key(keys.ticket))
        if keys.closed_batch is not None:
            self.closed_batches.add(compact_key(keys.closed_batch))
        if keys.resume is not None:
            self.resumes[compact_key(keys.resume.ticket_id)] = keys.resume.digest

    def size(self) -> int:
        return len(self.tickets) + len(self.closed_batches) + len(self.resumes)


class TraceJudge:
    """Feeds commits in order and keeps only what later rules need (Cost
    model): each Thread's head, each open Run's snapshot and keyed history, for an Ended
    Run only a stub without its batch (nothing may follow it, and saying so needs no
    body), and one compact key per ticket id ever used (ticket ids are never reused)."""

    def __init__(self, fork_points: Iterable[tuple[str, int]] = ()) -> None:
        self.heads: dict[str, ThreadHead] = {}
        self.runs: dict[str, RunSnapshot] = {}
        self.tickets: set[Key] = set()
        self.histories: dict[str, KeyedHistory] = {}
        self.commits = 0
        self.delegations = DelegationJudge()
        self.forks = ForkJudge(fork_points)
        #: the Threads of the file being judged (``check_lines``), for its finding
        self.file_threads: set[str] = set()

    def _ticket_seen(self, ticket_id: str) -> bool:
        return compact_key(ticket_id) in self.tickets

    def feed(self, commit: ThreadCommit) -> Rejection | None:
        """Judge one commit; on acceptance it becomes the committed state."""
        run_id = commit.run_id
        prev = self.runs.get(run_id)
        delegations = self.delegations
        if commit.forked_from is None and (
            commit.parent is not None or (commit.batch is not None and delegations.activated)
        ):  # else ``before`` has nothing to say
            early = delegations.before(commit, prev, self.runs)
            if early is not None:
                return early
        verdict = validate_commit(
            self.heads.get(commit.thread_id),
            prev,
            commit,
            self.histories.get(run_id, NO_HISTORY),
            ticket_seen=self._ticket_seen,
        )
        if isinstance(verdict, Rejection):
            return verdict
        if commit.forked_from is not None:
            mismatch = self.forks.fork(commit)
            if mismatch is not None:
                return mismatch
        self.heads[commit.thread_id] = verdict.head
        disposition = commit.disposition
        if isinstance(disposition, Ended):
            ended = verdict.run  # kept as a stub: nothing may follow it, and saying so needs no body
            self.runs[run_id] = RunSnapshot(
                thread_id=ended.thread_id,
                run_id=ended.run_id,
                version=ended.version,
                step=ended.step,
                state=ended.state,
                batch=None,
                provided_inputs=(),
                staged=ended.staged,
            )
            self.histories.pop(run_id, None)
        else:
            self.runs[run_id] = verdict.run
            history = self.histories.get(run_id)
            if history is None:
                history = self.histories[run_id] = KeyedHistory()
            if verdict.keys is not NO_KEYS:
                history.add(verdict.keys)
            if isinstance(disposition, Awaiting):
                self.tickets.add(compact_key(disposition.ticket.ticket_id))
        self.commits += 1
        self.file_threads.add(commit.thread_id)
        if self.forks.running:
            late = self.forks.source(commit, verdict.run)
            if late is not None:
                return late
        return delegations.after(commit, prev)

    def retained(self) -> dict[str, int]:
        """What the judge holds, by count: Threads, open and Ended Runs, calls of open
        batches, history keys of open Runs, ticket keys."""
        open_runs = [run for run in self.runs.values() if not isinstance(run.state, Ended)]
        return {
            "threads": len(self.heads),
            "open_runs": len(open_runs),
            "ended_runs": len(self.runs) - len(open_runs),
            "open_calls": sum(len(run.batch.calls) for run in open_runs if run.batch is not None),
            "history_keys": sum(history.size() for history in self.histories.values()),
            "ticket_keys": len(self.tickets),
        }


class DelegationJudge:
    """I15 across Threads, for a trace that holds parents and children together: each
    child is activated once, for the call whose ``delegation`` names it, after that call's
    Executing commit; a concurrent delegation's result equals its child's terminus. A
    parent judged without its children is judged without these cross-Thread checks; a
    mismatch found only when the child ends later in the file is reported there. When
    the child comes first (its file before its parent's), the parent's Executing commit
    is checked against the child already activated for that call."""

    def __init__(self) -> None:
        self.child_of: dict[str, tuple[str, str]] = {}  # child run -> (parent run, call)
        self.activated: dict[tuple[str, str], tuple[str, str]] = {}  # (parent run, call) -> its child's (thread, run)
        self.finals: dict[str, JsonValue] = {}  # open child run -> last assistant content
        self.termini: dict[str, JsonValue] = {}  # ended child run -> terminus
        self.claimed: dict[str, JsonValue] = {}  # child run -> parent's result, child not ended yet
        self.fixed: dict[tuple[str, str], tuple[str, str]] = {}  # (parent run, call) -> (thread, run)

    def before(
        self, commit: ThreadCommit, prev: RunSnapshot | None, runs: dict[str, RunSnapshot]
    ) -> Rejection | None:
        parent = commit.parent
        if commit.forked_from is not None:
            return None  # a fork's delegations are its source's history, judged there
        if commit.batch is not None and self.activated:
            early = self._fixes_another_child(commit)
            if early is not None:
                return early
        if parent is None:
            return None
        if prev is not None or commit.run_id in self.child_of:
            return Rejection(Rule.CHILD_ONCE, f"child run {commit.run_id!r} is activated again (I15)")
        key = (parent.run_id, parent.call_id)
        if key in self.activated:
            return Rejection(
                Rule.CHILD_ONCE,
                f"call {parent.call_id!r} of run {parent.run_id!r} already activated its child (I15)",
            )
        fixed = self.fixed.get(key)
        if fixed is not None:
            if fixed != (commit.thread_id, commit.run_id):
                return Rejection(
                    Rule.DELEGATION_FIXED,
                    f"run {commit.run_id!r} of thread {commit.thread_id!r} is activated for call "
                    f"{parent.call_id!r}, whose committed delegation names run {fixed[1]!r} of thread "
                    f"{fixed[0]!r}",
                )
            return None
        owner = runs.get(parent.run_id)
        if owner is not None and not isinstance(owner.state, Ended):
            return Rejection(
                Rule.DELEGATION_FIXED,
                f"run {commit.run_id!r} is activated for call {parent.call_id!r} of run "
                f"{parent.run_id!r} before the call's Executing commit fixed its child (I5, I15)",
            )
        return None  # the parent is not in this trace (or only its end is)

    def _fixes_another_child(self, commit: ThreadCommit) -> Rejection | None:
        """A call's Executing commit naming a child other than the one already activated
        for it, or a child already activated for another call (the child came first)."""
        assert commit.batch is not None
        for call in commit.batch.calls:
            delegation = call.delegation
            key = (commit.run_id, call.call_id)
            if delegation is None or key in self.fixed:
                continue
            child = self.activated.get(key)
            if child is not None and child != (delegation.thread_id, delegation.run_id):
                return Rejection(
                    Rule.DELEGATION_FIXED,
                    f"call {call.call_id!r} of run {commit.run_id!r} fixes child run {delegation.run_id!r} "
                    f"of thread {delegation.thread_id!r}, but run {child[1]!r} of thread {child[0]!r} was "
                    "activated for it (I15)",
                )
            owner = self.child_of.get(delegation.run_id)
            if owner is not None and owner != key:
                return Rejection(
                    Rule.DELEGATION_FIXED,
                    f"call {call.call_id!r} of run {commit.run_id!r} fixes child run {delegation.run_id!r}, "
                    f"which was activated for call {owner[1]!r} of run {owner[0]!r} (I15)",
                )
        return None

    def after(self, commit: ThreadCommit, prev: RunSnapshot | None) -> Rejection | None:
        if commit.forked_from is not None:  # history: its delegations were judged in the source
            for call in commit.batch.calls if commit.batch is not None else ():
                if call.delegation is not None:
                    self.fixed[(commit.run_id, call.call_id)] = (call.delegation.thread_id, call.delegation.run_id)
            return None
        if commit.parent is not None and prev is None:
            self.child_of[commit.run_id] = (commit.parent.run_id, commit.parent.call_id)
            self.activated[(commit.parent.run_id, commit.parent.call_id)] = (commit.thread_id, commit.run_id)
            self.finals[commit.run_id] = None
        if commit.run_id in self.finals:
            for message in commit.messages:
                if message.role is Role.ASSISTANT:
                    self.finals[commit.run_id] = message.content
            if isinstance(commit.disposition, Ended):
                final = self.finals.pop(commit.run_id)
                ended = terminus(commit.thread_id, commit.run_id, commit.disposition.cause, final)
                self.termini[commit.run_id] = ended
                if commit.run_id in self.claimed and not same_json(self.claimed.pop(commit.run_id), ended):
                    parent_run, call_id = self.child_of[commit.run_id]
                    return Rejection(
                        Rule.CHILD_TERMINUS,
                        f"child run {commit.run_id!r} ends with a terminus that differs from the result "
                        f"run {parent_run!r} committed for call {call_id!r} (I15)",
                    )
        if commit.batch is None:
            return None
        before = prev.batch if prev is not None else None
        for call in commit.batch.calls:
            if call.delegation is None:
                continue  # the common case: nothing below is about it
            self.fixed[(commit.run_id, call.call_id)] = (call.delegation.thread_id, call.delegation.run_id)
            if not (is_concurrent_delegation(call) and isinstance(call.status, CallCompleted)):
                continue
            old = before.call(call.call_id) if before is not None and before.batch_id == commit.batch.batch_id else None
            if old is not None and isinstance(old.status, CallCompleted):
                continue  # judged when it completed
            assert call.delegation is not None
            child = call.delegation.run_id
            value = call.status.result.value
            if child in self.termini:
                if not same_json(value, self.termini[child]):
                    return Rejection(
                        Rule.CHILD_TERMINUS,
                        f"call {call.call_id!r} completes with a value that is not its child "
                        f"{child!r}'s committed terminus (I15)",
                    )
            elif child in self.finals:
                return Rejection(
                    Rule.CHILD_TERMINUS,
                    f"call {call.call_id!r} completes while its child {child!r} has not ended (I15)",
                )
            else:
                self.claimed[child] = value  # the child may come later in the file
        return None


def check_lines(lines: Iterable[bytes], judge: TraceJudge | None = None) -> Finding:
    """Judge a whole trace; stops at the first illegal or unreadable line. Given a
    ``judge`` that already holds other files, the lines continue its trace (``check_files``);
    the finding counts this file's commits and Threads only."""
    if judge is None:  # lines in memory are read twice: the fork points first
        judge = TraceJudge(fork_points(lines) if isinstance(lines, Sequence) else ())
    before = judge.commits
    judge.file_threads = set()
    number = 0
    iterator = iter(lines)
    while True:
        try:
            raw = next(iterator)
        except StopIteration:
            break
        except NotATrace as error:
            return Finding(Verdict.NOT_A_TRACE, number + 1, NOT_A_TRACE, str(error), judge.commits - before)
        number += 1
        finding = _judge_line(judge, raw, number, before)
        del raw  # hold one line at a time, never the previous one during the next parse
        if finding is not None:
            return finding
    if number == 0:
        return Finding(Verdict.NOT_A_TRACE, 0, NOT_A_TRACE, "empty file: a trace has at least one commit")
    return Finding(Verdict.LEGAL, commits=judge.commits - before, threads=len(judge.file_threads))


def _judge_line(judge: TraceJudge, raw: bytes, number: int, before: int) -> Finding | None:
    """Decode and judge one line; its objects die on return unless the judge keeps them."""
    try:
        commit = commit_from_json(parse_line(raw))
    except IllegalShape as illegal:
        return Finding(Verdict.ILLEGAL, number, illegal.rule.value, str(illegal), judge.commits - before)
    except (NotATrace, TraceFormatError) as error:
        return Finding(Verdict.NOT_A_TRACE, number, NOT_A_TRACE, str(error), judge.commits - before)
    rejection = judge.feed(commit)
    if rejection is not None:
        return Finding(Verdict.ILLEGAL, number, rejection.rule.value, rejection.message, judge.commits - before)
    return None


def check_file(path: Path, judge: TraceJudge | None = None) -> Finding:
    """Judge one file (``-``: standard input); an unreadable file is 'not a trace'. With
    a ``judge``, the file continues the trace that judge holds (``check_files``)."""
    if str(path) == STDIN:
        return check_lines(bounded_lines(sys.stdin.buffer), judge)
    if judge is None:
        judge = TraceJudge(file_fork_points([path]))
    try:
        with path.open("rb") as stream:
            return check_lines(bounded_lines(stream), judge)
    except OSError as error:
        return Finding(Verdict.NOT_A_TRACE, 0, NOT_A_TRACE, f"cannot read: {error.strerror or error}")


def check_files(paths: Iterable[Path]) -> Iterator[tuple[Path, Finding]]:
    """Judge several files as one trace, in the order given, and yield each file's
    finding as soon as it is reached: one set of used ticket ids, one set of Threads
    and Runs (a Thread's commits may go on in a later file), and a child Run judged
    against its parent whichever file holds either. A file's illegal line stops that
    file only; what was accepted before it stays, and the next file goes on from there."""
    paths = list(paths)
    judge = TraceJudge(file_fork_points(paths))
    for path in paths:
        yield path, check_file(path, judge)


def check_commits(commits: Iterable[ThreadCommit]) -> Finding:
    """Judge commits already in memory (the simulator's exported traces)."""
    seq = commits if isinstance(commits, Sequence) else ()  # read twice: the fork points first
    judge = TraceJudge((c.forked_from.thread_id, c.forked_from.version) for c in seq if c.forked_from)
    for number, commit in enumerate(commits, start=1):
        rejection = judge.feed(commit)
        if rejection is not None:
            return Finding(Verdict.ILLEGAL, number, rejection.rule.value, rejection.message, judge.commits)
    return attrs.evolve(
        Finding(Verdict.LEGAL), commits=judge.commits, threads=len(judge.heads)
    )
