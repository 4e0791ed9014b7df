"""Example traces of forks (``fork-carries-source-state``): a source Run and a fork of it
taken at a version where its batch is half done, built by ``runkernel.kernel.fork``."""

from __future__ import annotations

from example_log import Example, Line, Log, allow, call, done, mutated, tools
from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.fork import ForkIds, ForkPoint, fork_commit, fork_point


def _source() -> tuple[Log, int]:
    """thread-1: two calls asked for, the first one done; the version where it is done."""
    log = Log()
    log.activate("thread-1", "run-1", "Look up two cities.")
    log.feed("run-1", tools("batch-1", call("c1", "lookup", {"city": "Oslo"}), call("c2", "lookup", {"city": "Rome"})))
    log.feed("run-1", allow("c1"))
    line = log.feed("run-1", done("c1", 1, {"temp": 3}))
    return log, int(line["version"])


def _fork(lines: list[Line], at: int) -> Line:
    point = fork_point((commit_from_json(x) for x in lines), "run-1", at)
    assert isinstance(point, ForkPoint)
    commit = fork_commit(point, ForkIds("thread-2", "run-2", ["op-c2-fork"], "ticket-unused"))
    assert not isinstance(commit, Exception) and hasattr(commit, "forked_from")
    return commit_to_json(commit)  # type: ignore[arg-type]


def ex_fork() -> Example:
    # Legal: run-2 forks thread-1 at the version where c1 is done: c1 keeps its result and
    # operation id, c2 (Requested) gets a new operation id.
    log, at = _source()
    fork = _fork(log.lines, at)
    legal = log.lines + [fork]
    # Illegal: the fork keeps c2's operation id (a call that is not terminal at the
    # source runs in the fork under a new one).
    bad = mutated(fork, lambda ln: ln["batch"]["calls"][1].update(operation_id="op-c2"))
    return (legal, log.lines + [bad],
            "the fork carries call c2, not terminal at its source, under the source's operation id")
