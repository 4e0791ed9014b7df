"""A ticket id used once is refused ever after, from every entry point of the judge
(Resume: ticket ids are never reused): ``validate_commit`` called directly,
and the trace judge by each of its doors (``TraceJudge``, ``check_trace`` on commits and
on a file, ``runkernel check-trace``). The stores' appends are held to the same rule by
the store contract (``runkernel/conformance/suite.py``).

Each scenario is an earlier Run that entered Awaiting on a ticket, then another Run whose
commit entering Awaiting names the same ticket: once a later Run of the same Thread
(the earlier one was cancelled), once a Run of another Thread.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import runkernel
from runkernel.adapters.stores.serial import commit_text
from runkernel.cli.entry import main
from runkernel.kernel.history import RunHistory
from runkernel.kernel.protocol import EndRequest
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Awaiting, EndCause, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, TicketSeen, validate_commit
from runkernel.kernel.values import EndCauseKind
from runkernel.specs.checker import TraceJudge, Verdict
from runkernel.testing import awaiting_run, step

SHARED = "ticket-reused-000000000001"
WHERE = ["an-earlier-run-of-the-thread", "a-run-of-another-thread"]


def _scenario(where: str) -> tuple[list[ThreadCommit], list[ThreadCommit]]:
    """(the earlier Run's commits, the reusing Run's commits); the reusing Run's last
    commit enters Awaiting on the ticket the earlier Run used."""
    earlier, waiting = awaiting_run("t1", "r1", SHARED)
    if where == "an-earlier-run-of-the-thread":
        cancelled = step(waiting, EndRequest(EndCause(EndCauseKind.CANCELLED))).commit
        assert cancelled is not None
        earlier.append(cancelled)
        reusing, _ = awaiting_run("t1", "r2", SHARED, expected_version=cancelled.version)
    else:
        reusing, _ = awaiting_run("t2", "r2", SHARED)
    assert isinstance(reusing[-1].disposition, Awaiting)
    assert reusing[-1].disposition.ticket.ticket_id == SHARED
    return earlier, reusing


def _judge_alone(commits: list[ThreadCommit], ticket_seen: TicketSeen) -> list[Accepted | Rejection]:
    """``validate_commit`` on one Run's commits in order, each on the state the last
    accepted one produced; the Thread's head before them is what their first says."""
    first = commits[0]
    head = ThreadHead(first.thread_id, first.expected_version, None) if first.expected_version else None
    run: RunSnapshot | None = None
    history = RunHistory()
    verdicts: list[Accepted | Rejection] = []
    for commit in commits:
        verdict = validate_commit(head, run, commit, history, ticket_seen=ticket_seen)
        verdicts.append(verdict)
        if isinstance(verdict, Accepted):
            head, run, history = verdict.head, verdict.run, history.plus(verdict.keys)
    return verdicts


# --- validate_commit, called directly ----------------------------------------------------


def test_validate_commit_has_no_default_for_the_used_tickets() -> None:
    parameter = inspect.signature(validate_commit).parameters["ticket_seen"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is inspect.Parameter.empty
    _, reusing = _scenario("a-run-of-another-thread")
    with pytest.raises(TypeError, match="ticket_seen"):
        validate_commit(None, None, reusing[0])  # type: ignore[call-arg]


@pytest.mark.parametrize("where", WHERE)
def test_validate_commit_refuses_a_ticket_its_ticket_seen_knows(where: str) -> None:
    earlier, reusing = _scenario(where)
    used = {c.disposition.ticket.ticket_id for c in earlier if isinstance(c.disposition, Awaiting)}
    assert used == {SHARED}
    verdicts = _judge_alone(reusing, used.__contains__)
    assert all(isinstance(v, Accepted) for v in verdicts[:-1]), verdicts
    refused = verdicts[-1]
    assert isinstance(refused, Rejection), refused
    assert refused.rule is Rule.TICKET_REUSED
    assert SHARED in refused.message
    # judged as one Run alone, by the caller's explicit choice, the same commit is legal:
    # the refusal came from the used tickets it was given, nothing else
    alone = _judge_alone(reusing, NO_TICKETS_SEEN)[-1]
    assert isinstance(alone, Accepted) and isinstance(alone.run.state, Awaiting)


# --- the trace judge ------------------------------------------------------------------


def _expected_line(earlier: list[ThreadCommit], reusing: list[ThreadCommit]) -> int:
    return len(earlier) + len(reusing)


@pytest.mark.parametrize("where", WHERE)
def test_the_trace_judge_refuses_the_reused_ticket_when_fed_commits(where: str) -> None:
    earlier, reusing = _scenario(where)
    judge = TraceJudge()
    for commit in earlier + reusing[:-1]:
        assert judge.feed(commit) is None
    refused = judge.feed(reusing[-1])
    assert refused is not None and refused.rule is Rule.TICKET_REUSED, refused
    print(f"{where}: trace judge refused line {_expected_line(earlier, reusing)}: {refused}")


@pytest.mark.parametrize("where", WHERE)
def test_check_trace_refuses_the_reused_ticket_in_commits_and_in_a_file(where: str, tmp_path: Path) -> None:
    earlier, reusing = _scenario(where)
    commits = earlier + reusing
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(commit_text(c) + "\n" for c in commits), encoding="utf-8")
    for source in (commits, path):
        finding = runkernel.check_trace(source)
        assert (finding.verdict, finding.line, finding.rule) == (
            Verdict.ILLEGAL,
            _expected_line(earlier, reusing),
            Rule.TICKET_REUSED.value,
        ), finding
    # without the reusing commit the file is legal
    assert runkernel.check_trace(commits[:-1]).verdict is Verdict.LEGAL


@pytest.mark.parametrize("where", WHERE)
def test_the_check_trace_command_refuses_the_reused_ticket(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier, reusing = _scenario(where)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(commit_text(c) + "\n" for c in earlier + reusing), encoding="utf-8")
    code = main(["check-trace", str(path)])
    err = capsys.readouterr().err
    assert code == Verdict.ILLEGAL
    assert err.startswith(f"{path}:{_expected_line(earlier, reusing)}: {Rule.TICKET_REUSED.value}: "), err
