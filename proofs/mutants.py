"""A test of the tests: plant each known bug in a copy of the code and show that the one
detector named for it catches it.

Each mutant is a single textual replacement (the original text must occur exactly
once, so a refactoring that moves it makes this script fail loudly instead of
silently testing nothing). Each detector runs alone against the mutated copy, with no
Hypothesis shrinking and stopping at the first failure, with a 600-second hang guard
(detectors take seconds; the guard is far above that so load never decides). Before
the mutants, every detector must pass on the unmutated copy; otherwise a "catch" would
mean nothing.

    python proofs/mutants.py [--only NAME] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attrs import frozen

ROOT = Path(__file__).resolve().parent.parent
#: Wall-clock hang guard per detector run: detectors take 1-20 s on the 2-core CI
#: machine under load; a catch or a pass is decided by the detector, never by this.
TIMEOUT = 600.0


@frozen
class Detector:
    """One command that must pass on clean code and fail on its mutants."""

    name: str
    argv: tuple[str, ...]
    baseline_runs_here: bool = True
    #: text the output must hold for a failure to count as a catch (not a crash)
    catch_marker: str = "failed"


STATEFUL = Detector(
    "stateful test (memory store)",
    ("-m", "pytest", "tests/test_stateful_runtime.py", "-k", "Memory", "-x", "-q", "-p", "no:cacheprovider"),
)
MODEL_CHECKER = Detector(
    "model checker (CI bound)",
    ("proofs/model_check.py", "--profile", "ci"),
    # the CI bound takes minutes to exhaust on clean code; CI runs it on its own
    baseline_runs_here=False,
    catch_marker="verdict: VIOLATION",
)


def unit(test_id: str) -> Detector:
    return Detector(f"unit test {test_id.split('::')[-1]}", ("-m", "pytest", test_id, "-x", "-q", "-p", "no:cacheprovider"))


WRONG_KIND_UNIT = unit("tests/test_decide_units.py::test_a_resume_with_the_wrong_wait_kind_is_rejected")
EXECUTING_UNIT = unit("tests/test_decide_units.py::test_recovery_never_turns_executing_into_requested")
SETTLE_UNIT = unit(
    "tests/test_peer_failures.py::test_a_command_is_settled_in_the_transaction_of_the_commit_that_applies_it"
)
CANCEL_UNIT = unit("tests/test_decide_units.py::test_cancelling_an_awaiting_run_closes_the_waiting_call")
PUSH_BATCH_UNIT = unit(
    "tests/test_push_driver.py::test_a_tool_batch_runs_in_call_order_and_publishes_every_result"
)
PUSH_HISTORY_UNIT = unit("tests/test_push_driver.py::test_text_without_an_end_starts_another_step")
SLOPPY_TICKET_UNIT = unit("tests/test_resume_judge.py::test_a_resume_naming_a_sloppily_equal_ticket_is_illegal")
COMMITTED_POLICY_UNIT = unit(
    "tests/test_resume_judge.py::test_recover_reads_the_committed_policy_not_the_workers_configuration"
)
GROUP_ROUND_UNIT = unit("tests/test_group_gate.py::test_every_gate_answer_on_every_member_position[allow-d1]")
GROUP_STATE_UNIT = unit(
    "tests/test_group_gate.py::test_the_judge_refuses_a_member_waiting_while_another_starts_in_the_same_commit"
)

STALE_HEAD_UNIT = unit(
    "tests/test_postgres_race.py::test_a_writer_commits_again_after_another_writer_moved_its_thread"
)


def example(name: str) -> Detector:
    """The illegal example trace ``name`` must be reported at its line with its rule."""
    return unit(f"tests/test_trace_examples.py::test_illegal_example_is_reported_at_its_line_and_rule[{name}.jsonl]")


@frozen
class Mutant:
    """A planted bug: replace ``old`` by ``new`` in ``path``."""

    name: str
    path: str
    old: str
    new: str
    detector: Detector


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "a stream checkpoint becomes the committed reply",
        "runkernel/adapters/runtime.py",
        "            return InferenceResult(reply.content, end=reply.end, staged=staging.staged)\n",
        "            return InferenceResult(reply.content if partial is None else partial, end=reply.end, staged=staging.staged)\n",
        STATEFUL,
    ),
    Mutant(
        "recovery turns Executing into Requested",
        "runkernel/kernel/recover.py",
        "        unknown = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)\n",
        "        unknown = CallRequested()  # type: ignore[assignment]\n",
        EXECUTING_UNIT,
    ),
    Mutant(
        "the executor runs before Executing is committed",
        "runkernel/kernel/planning.py",
        "    effects: tuple[Effect, ...] = (Commit(commit),) + tuple(follow_up)\n",
        "    effects: tuple[Effect, ...] = tuple(follow_up) + (Commit(commit),)\n",
        STATEFUL,
    ),
    Mutant(
        "inference runs while a batch is open",
        "runkernel/kernel/recover.py",
        "    if batch is None:\n        return RecoveryRow.RUNNING_NO_OPEN_BATCH\n",
        "    if batch is None or not any(\n"
        "        isinstance(c.status, (CallExecuting, CallAwaiting)) for c in batch.calls\n"
        "    ):\n        return RecoveryRow.RUNNING_NO_OPEN_BATCH\n",
        MODEL_CHECKER,
    ),
    Mutant(
        "a resume is accepted with the wrong wait kind",
        "runkernel/kernel/resume.py",
        "    if command.kind is not ticket.wait:\n"
        "        return Rejection(\n"
        "            Rule.WAIT_KIND_MISMATCH,\n"
        "            f\"the run waits for {ticket.wait.value!r}, the command is {command.kind.value!r}\",\n"
        "        )\n"
        "    if not isinstance(command.payload, PAYLOADS_BY_WAIT[ticket.wait]):\n",
        "    if not isinstance(command.payload, PAYLOADS_BY_WAIT[command.kind]):\n",
        WRONG_KIND_UNIT,
    ),
    Mutant(
        "recovery overwrites a terminal result",
        "runkernel/kernel/recover.py",
        "        return settle(state, batch.replace_call(attrs.evolve(call, status=unknown)), policies)\n",
        "        overwritten = attrs.evolve(batch, calls=tuple(attrs.evolve(c, status=unknown) for c in batch.calls))\n"
        "        return settle(state, overwritten, policies)\n",
        MODEL_CHECKER,
    ),
    Mutant(
        "a replay attempt reuses its attempt number",
        "runkernel/kernel/recover.py",
        "            replay = batch.replace_call(attrs.evolve(call, status=CallExecuting(attempt + 1)))\n"
        "            again = execute_effect(call, attempt + 1, state.input_for(call.call_id))\n",
        "            replay = batch.replace_call(attrs.evolve(call, status=CallExecuting(attempt)))\n"
        "            again = execute_effect(call, attempt, state.input_for(call.call_id))\n",
        STATEFUL,
    ),
    Mutant(
        "a cancelled Run leaves an Awaiting call open",
        "runkernel/kernel/effects_plan.py",
        "            return CallIndeterminate(status.attempt, reason)\n",
        "            return status\n",
        CANCEL_UNIT,
    ),
    Mutant(
        "a non-replay tool is re-executed after a crash",
        "runkernel/kernel/recover.py",
        "        if recovery.mode is RecoveryMode.REPLAY:\n",
        "        if recovery.mode is not RecoveryMode.RECONNECT:\n",
        STATEFUL,
    ),
    Mutant(
        "the push driver hands out RunCall before its Executing commit",
        "runkernel/adapters/driver_core.py",
        "                    case Commit():\n",
        "                    case Commit() if any(isinstance(e, Execute) for e in decision.effects):\n"
        "                        pass\n"
        "                    case Commit():\n",
        PUSH_BATCH_UNIT,
    ),
    Mutant(
        "the push driver drops an acknowledged commit's messages",
        "runkernel/adapters/driver_core.py",
        "        self.history.extend(commit.messages)\n",
        "        pass\n",
        PUSH_HISTORY_UNIT,
    ),
    Mutant(
        "an inbox command is settled after its commit, not in it",
        "runkernel/adapters/runtime.py",
        "                self._commit(drive.state, effect.commit, decision.state, settle)\n"
        "                drive.messages.extend(effect.commit.messages)\n"
        "                drive.state = decision.state\n"
        "                if entry is not None:\n"
        "                    # settled in the commit's own transaction: no crash falls in between\n"
        "                    self.on_event(CommandSettled(entry, \"applied\"))\n",
        "                self._commit(drive.state, effect.commit, decision.state, None)\n"
        "                drive.messages.extend(effect.commit.messages)\n"
        "                drive.state = decision.state\n"
        "                if entry is not None:\n"
        "                    self._settle(entry, \"applied\")\n",
        SETTLE_UNIT,
    ),
    Mutant(
        "the judge lets a denied call go on executing",
        "runkernel/kernel/validate_resume.py",
        "        if not executes:\n",
        "        if False:\n",
        example("resume-edge-per-payload"),
    ),
    Mutant(
        "the judge does not check the resumed digest",
        "runkernel/kernel/validate_resume.py",
        "    if not hmac.compare_digest(digest.encode(\"utf-8\", \"surrogatepass\"), expected.encode(\"ascii\")):\n",
        "    if False:\n",
        example("resume-digest-is-jcs-sha256"),
    ),
    Mutant(
        "ticket ids compare case-folded and trimmed",
        "runkernel/kernel/validate_resume.py",
        "    return hmac.compare_digest(a.encode(\"utf-8\", \"surrogatepass\"), b.encode(\"utf-8\", \"surrogatepass\"))\n",
        "    return hmac.compare_digest(a.strip().lower().encode(), b.strip().lower().encode())\n",
        SLOPPY_TICKET_UNIT,
    ),
    Mutant(
        "recovery reads the worker's policy instead of the committed one",
        "runkernel/kernel/recover.py",
        "        recovery = call.policy_or(policies.for_tool(call.tool)).recovery\n",
        "        recovery = policies.for_tool(call.tool).recovery\n",
        COMMITTED_POLICY_UNIT,
    ),
    Mutant(
        "a group member the gate allowed starts before the gate round is over",
        "runkernel/kernel/gate.py",
        "    if rest:\n        return Decision(state, (RunGate(rest[0], held),))\n",
        "    if rest:\n        return _start_group(state, batch, held, policies)\n",
        GROUP_ROUND_UNIT,
    ),
    Mutant(
        "the judge lets a group member wait while another member runs",
        "runkernel/kernel/validate_calls.py",
        "            not (executing and waiting),\n",
        "            True,\n",
        GROUP_STATE_UNIT,
    ),
    Mutant(
        "a PostgreSQL store trusts its cached head after a conflict",
        "runkernel/adapters/postgres_store.py",
        "                if not fresh and self._written is not None:\n",
        "                if False:\n",
        STALE_HEAD_UNIT,
    ),
)


def copy_tree(destination: Path) -> Path:
    target = destination / "repo"
    ignore = shutil.ignore_patterns(
        ".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".hypothesis", "*.egg-info", "*.sqlite*", ".tox"
    )
    shutil.copytree(ROOT, target, ignore=ignore)
    return target


def run(detector: Detector, tree: Path, timeout: float) -> tuple[str, float]:
    """'passed', 'failed' (exit 1 with the detector's marker), 'broken' (any other
    failure: a crash of the detector is not a catch) or 'timeout', and the seconds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["HYPOTHESIS_PROFILE"] = "mutant"
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, *detector.argv],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started
    seconds = time.monotonic() - started
    if result.returncode == 0:
        return "passed", seconds
    if result.returncode == 1 and detector.catch_marker in result.stdout:
        return "failed", seconds
    tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
    print(f"    {detector.name} exited {result.returncode}: {' | '.join(tail)}")
    return "broken", seconds


def imports_from(tree: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", "import runkernel, sys; sys.stdout.write(runkernel.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return Path(out).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only the mutant whose name contains this text")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help=f"hang guard in seconds per detector run (default {TIMEOUT:.0f})")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only is None or args.only in m.name]
    if not chosen:
        print(f"mutants: no mutant matches {args.only!r}", file=sys.stderr)
        return 2
    failures = 0
    with tempfile.TemporaryDirectory(prefix="runkernel-mutants-") as scratch:
        clean = copy_tree(Path(scratch) / "clean")
        where = imports_from(clean)
        if not where.is_relative_to(clean.resolve()):
            print(f"mutants: the copy imports runkernel from {where}, not the copy", file=sys.stderr)
            return 2
        print("baseline: every detector passes on the unmutated code")
        for detector in dict.fromkeys(m.detector for m in chosen):
            if not detector.baseline_runs_here:
                print(f"  {detector.name:<58} (checked by its own CI step)")
                continue
            outcome, seconds = run(detector, clean, max(args.timeout, 120.0))
            print(f"  {detector.name:<58} {outcome:<8} {seconds:6.1f}s")
            failures += outcome != "passed"
        if failures:
            print("mutants: a detector fails on clean code; its catches would mean nothing", file=sys.stderr)
            return 1
        print("\nmutants: each planted bug must be caught by its named detector")
        for index, mutant in enumerate(chosen):
            tree = copy_tree(Path(scratch) / f"m{index}")
            source = tree / mutant.path
            text = source.read_text(encoding="utf-8")
            if text.count(mutant.old) != 1:
                print(f"  {mutant.name}: the text to mutate occurs {text.count(mutant.old)} times in {mutant.path}")
                failures += 1
                continue
            source.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
            outcome, seconds = run(mutant.detector, tree, args.timeout)
            caught = outcome == "failed"
            failures += not caught
            verdict = "caught" if caught else f"SURVIVED ({outcome})"
            print(f"  {mutant.name:<50} {mutant.detector.name:<40} {verdict:<18} {seconds:6.1f}s")
            shutil.rmtree(tree, ignore_errors=True)
    caught_count = len(chosen) - failures
    print(f"\n{caught_count} of {len(chosen)} mutants caught")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
