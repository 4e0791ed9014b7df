"""Matching a fork's first line against its source in ``check-trace`` (``ForkJudge``).

A fork's first line (``forked_from``) is judged alone by ``validate_commit``, as an
activation that carries history. When the source Thread is in the trace too, the line is
also matched against the source's state at the version it names. A first pass over the
input (``fork_points``; standard input cannot be read twice and is left out) finds the
versions forks name, so the judge keeps the state at those versions only: a snapshot and
a digest of the Thread's messages per named version, and one running digest per source
Thread (Cost model: nothing per line of history).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from runkernel.errors import NotATrace
from runkernel.kernel.canonical import canonical_bytes
from runkernel.kernel.codec import message_to_json
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, RunSnapshot, ThreadCommit
from runkernel.kernel.validate_fork import check_fork_against
from runkernel.specs.trace_lines import bounded_lines, parse_line

#: the FILE that stands for standard input
STDIN = "-"


def _messages_digest(digest: Any, messages: Iterable[Message]) -> None:
    for message in messages:
        digest.update(canonical_bytes(message_to_json(message)))
        digest.update(b"\n")


class ForkJudge:
    """Matches a fork's first line against its source's state at the version it names,
    when the source Thread is in the trace. It keeps, for the versions forks name only
    (``points``, found by a first pass), the source Run's snapshot and a digest of the
    Thread's messages up to it, and one running digest per such Thread; a fork that
    comes before its source waits (its line without messages, and their digest) and is
    matched when the source reaches that version, reported there."""

    def __init__(self, points: Iterable[tuple[str, int]]) -> None:
        self.wanted: set[tuple[str, int]] = set(points)
        self.running: dict[str, Any] = {thread: hashlib.sha256() for thread, _ in self.wanted}
        self.kept: dict[tuple[str, int], tuple[RunSnapshot, bytes]] = {}
        self.waiting: dict[tuple[str, int], list[tuple[ThreadCommit, bytes]]] = {}

    def fork(self, commit: ThreadCommit) -> Rejection | None:
        """A fork's first line, legal alone: match it now, or later, or never (its
        source is not in the trace)."""
        forked = commit.forked_from
        assert forked is not None
        key = (forked.thread_id, forked.version)
        if key not in self.wanted:
            return None
        digest = hashlib.sha256()
        _messages_digest(digest, commit.messages)
        if key in self.kept:
            return _match(self.kept[key], commit, digest.digest())
        self.waiting.setdefault(key, []).append((attrs.evolve(commit, messages=()), digest.digest()))
        return None

    def source(self, commit: ThreadCommit, run: RunSnapshot) -> Rejection | None:
        """A line accepted: follow the Threads forks name, keep their fork points."""
        running = self.running.get(commit.thread_id)
        if running is None:
            return None
        _messages_digest(running, commit.messages)
        key = (commit.thread_id, commit.version)
        if key not in self.wanted:
            return None
        point = self.kept[key] = (run, running.copy().digest())
        for fork, digest in self.waiting.pop(key, []):
            mismatch = _match(point, fork, digest)
            if mismatch is not None:
                return Rejection(mismatch.rule, f"fork run {fork.run_id!r} of thread {fork.thread_id!r} "
                                 f"(an earlier line) does not match this source line: {mismatch.message}")
        return None


def _match(point: tuple[RunSnapshot, bytes], fork: ThreadCommit, digest: bytes) -> Rejection | None:
    run, messages = point
    if digest != messages:
        return Rejection(Rule.FORK, f"fork run {fork.run_id!r} does not carry its source thread's messages "
                         f"up to version {run.version}")
    return check_fork_against(run, fork)


def fork_points(lines: Iterable[bytes]) -> set[tuple[str, int]]:
    """The first pass: the (thread, version) every fork line names. Lines that do not
    mention ``forked_from`` are not parsed; anything unreadable is left to the judge."""
    points: set[tuple[str, int]] = set()
    try:
        for raw in lines:
            if b'"forked_from"' not in raw:
                continue
            try:
                forked = parse_line(raw).get("forked_from")
            except (NotATrace, AttributeError):
                continue
            if isinstance(forked, dict) and isinstance(forked.get("thread_id"), str) and type(forked.get("version")) is int:
                points.add((forked["thread_id"], forked["version"]))
    except NotATrace:
        pass
    return points


_FORK_KEY = b'"forked_from"'
#: what the quick scan reads at a time (bounded memory, whatever the lines' length)
_SCAN_BLOCK = 1 << 20


def _mentions_forks(path: Path) -> bool:
    """Whether the file holds ``"forked_from"`` anywhere: one scan of fixed-size blocks,
    so a file without forks (most) is never split into lines twice."""
    tail = b""
    with path.open("rb") as stream:
        while True:
            block = stream.read(_SCAN_BLOCK)
            if not block:
                return False
            if _FORK_KEY in tail + block[: len(_FORK_KEY)] or _FORK_KEY in block:
                return True
            tail = block[-(len(_FORK_KEY) - 1):]


def file_fork_points(paths: Iterable[Path]) -> set[tuple[str, int]]:
    points: set[tuple[str, int]] = set()
    for path in paths:
        if str(path) == STDIN:
            continue
        try:
            if not _mentions_forks(path):
                continue
            with path.open("rb") as stream:
                points |= fork_points(bounded_lines(stream))
        except OSError:
            continue
    return points
