"""Property tests of forks (``runkernel.kernel.fork``), over random Runs drawn by the
kernel driver (``strategies.histories``: Runs with crashes and recoveries, so calls are
found Executing at many versions): a fork at every version of every Run is legal (the
judge accepts its first line alone, and matched against its source whichever comes
first) or refused by the rule, naming exactly the Executing calls that must not run
again; and no call found Executing under reconnect or indeterminate in the source is
ever started by the fork (it is closed Indeterminate, so recovery of the fork never
executes it).

Run with the ``ci`` profile by default; ``HYPOTHESIS_PROFILE=deep`` explores more.
"""

from __future__ import annotations

import attrs
from hypothesis import given

from driver_history import History
from runkernel.kernel.effects import Execute
from runkernel.kernel.fork import ForkIds, ForkPoint, ForkRefusalKind, ForkRefusal, fork_commit, fork_point
from runkernel.kernel.policies import Policies, RecoveryMode
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import CallAwaiting, CallExecuting, ThreadCommit, ToolCall, is_terminal
from runkernel.kernel.validate import NO_TICKETS_SEEN, successor, validate_commit
from runkernel.specs.checker import Verdict, check_commits
from strategies import histories


def _never_rerun(call: ToolCall) -> bool:
    """A call whose attempt started (Executing, or Awaiting a wait its own tool asked
    for) under a policy that never reruns it."""
    replay = call.policy is not None and call.policy.recovery.mode is RecoveryMode.REPLAY
    status = call.status
    started = isinstance(status, CallExecuting) or (isinstance(status, CallAwaiting) and status.attempt > 0)
    return started and not replay


def _ids(point: ForkPoint) -> ForkIds:
    calls = point.run.open_batch.calls if point.run.open_batch is not None else ()
    return ForkIds("fork-thread", "fork-run", [f"fork-op-{i}" for i in range(len(calls))], "fork-ticket")


@given(histories(max_threads=1, max_runs=2))
def test_a_fork_at_every_version_is_legal_or_refused_by_the_rule(history: History) -> None:
    commits = list(history.threads[0])
    forks = refused = 0
    for at, at_commit in enumerate(commits, start=1):
        point = fork_point(commits, at_commit.run_id, at)
        assert isinstance(point, ForkPoint), point
        batch = point.run.open_batch
        blocked = tuple(c.call_id for c in batch.calls if _never_rerun(c)) if batch is not None else ()
        for abandon in (False, True):
            made = fork_commit(point, _ids(point), abandon_open_calls=abandon)
            if blocked and not abandon:
                assert isinstance(made, ForkRefusal) and made.kind is ForkRefusalKind.OPEN_CALLS
                assert made.calls == blocked
                refused += 1
                continue
            assert isinstance(made, ThreadCommit), made
            forks += 1
            alone = validate_commit(None, None, made, ticket_seen=NO_TICKETS_SEEN)
            assert not isinstance(alone, Rejection), alone
            assert made.messages == tuple(m for c in commits[:at] for m in c.messages)
            for order in (commits + [made], [made] + commits):
                finding = check_commits(order)
                assert finding.verdict is Verdict.LEGAL, finding
            # safety: a call that must not run again is terminal in the fork, and the
            # fork's recovery never executes it
            carried = {c.call_id: c for c in made.batch.calls} if made.batch is not None else {}
            for call_id in blocked:
                assert is_terminal(carried[call_id].status)
            plan = recover(successor(None, made), Policies())
            started = {e.call_id for e in plan.decision.effects if isinstance(e, Execute)}
            assert not started & set(blocked)
    assert forks + refused >= len(commits)


@given(histories(max_threads=1, max_runs=1))
def test_a_fork_that_reuses_an_operation_id_or_keeps_an_executing_call_is_refused_by_the_judge(
    history: History,
) -> None:
    commits = list(history.threads[0])
    for at, at_commit in enumerate(commits, start=1):
        point = fork_point(commits, at_commit.run_id, at)
        assert isinstance(point, ForkPoint)
        made = fork_commit(point, _ids(point), abandon_open_calls=True)
        assert isinstance(made, ThreadCommit)
        source = point.run.open_batch
        if source is None or made.batch is None:
            continue
        for index, old in enumerate(source.calls):
            if is_terminal(old.status) or _never_rerun(old):
                continue
            calls = list(made.batch.calls)
            calls[index] = ToolCall(
                old.call_id, old.tool, old.arguments, old.operation_id, calls[index].status, old.policy
            )
            reused = attrs.evolve(made, batch=attrs.evolve(made.batch, calls=tuple(calls)))
            finding = check_commits(commits + [reused])
            assert finding.verdict is Verdict.ILLEGAL and finding.rule == Rule.FORK.value, finding
            # the fork first: the mismatch is reported where the source reaches the version
            early = check_commits([reused] + commits)
            assert early.verdict is Verdict.ILLEGAL and early.rule == Rule.FORK.value, early
            assert early.line == 1 + at and "an earlier line" in early.message
