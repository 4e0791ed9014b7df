"""``crashtest`` and ``runkernel crashtest``: planted bugs in users' apps are reported
with the boundary and the tool; clean apps of each kind pass; a non-deterministic app
is refused with exit 2. Each crash test prints its figures (``-s`` shows them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from runkernel import EndCauseKind, Returned, RunCall, RuntimeApp, ToolPolicy, ToolRegistry
from runkernel.adapters.drive.ports import ToolReply
from runkernel.cli.entry import main
from runkernel.testing.crashtest import (
    Answer,
    BadScenario,
    CrashReport,
    CrashTestRefused,
    NotDeterministic,
    Scenario,
    Turn,
    crashtest,
    format_json,
    format_text,
    scenario_schema,
    scenarios_from_json,
)
import crashtest_apps as apps

ROOT = Path(__file__).resolve().parent.parent.parent


def run(app: object, **options: object) -> CrashReport:
    report = crashtest(app, reset=apps.crashtest_reset, **options)  # type: ignore[arg-type]
    print(
        f"{report.app}: {report.crashes} crashes, {len(report.violations)} violations, "
        f"extra starts {[(e.tool, e.boundary, e.extra) for e in report.extra_starts]}, "
        f"recoveries {dict(report.recoveries)}"
    )
    return report


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["crashtest", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("app", [apps.clean, apps.push_clean, apps.async_push_clean], ids=lambda a: a.name)
def test_a_clean_app_of_each_kind_passes_every_boundary(app: object) -> None:
    report = run(app)
    assert report.passed, report.violations
    assert report.crashes == report.boundaries["approve-every-wait"] > 20
    assert {t.outcome for t in report.trials} == {"completed"}
    assert report.tools["charge"].most_extra == report.tools["reserve"].most_extra == 0
    # the replay search runs again when it died after its effect: allowed, and said
    assert report.tools["lookup"].most_extra == 1 and not report.tools["lookup"].failing
    rows = set(report.recoveries)
    assert {"call_executing", "call_requested", "call_awaiting", "running_no_open_batch"} <= rows


def test_a_non_idempotent_tool_declared_replay_is_reported_where_it_ran_twice() -> None:
    report = run(apps.double_charge)
    assert report.passed  # replay says running twice is harmless ...
    assert "up to 1 extra start per operation" in report.tools["charge"].advice()
    charged_twice = [e for e in report.extra_starts if e.tool == "charge"]
    assert [e.boundary for e in charged_twice] == ["#21 charge attempt 1, after_tool_effect", "#22 v10 (charge) finalize, before_write"]
    assert len(report.extra_starts_of("charge")) == 1
    assert "charge operation op-ct-7 +1 start, allowed (replay)" in format_text(report)

    strict = run(apps.double_charge, at_most_once=["charge"])  # ... unless it may run once at most
    assert not strict.passed
    assert {(v.rule, v.tool, v.boundary) for v in strict.violations} == {
        ("extra-start", "charge", "#21 charge attempt 1, after_tool_effect"),
        ("extra-start", "charge", "#22 v10 (charge) finalize, before_write"),
    }


def test_the_verdict_names_every_replay_tool_that_started_again() -> None:
    """A replay tool's extra start passes, but the verdict line says which ran again: a
    payment wrongly declared replay is seen at a glance, not only in the tools' table."""
    charged = run(apps.double_charge)
    assert charged.passed
    verdict = format_text(charged).splitlines()[-1]
    assert verdict == "verdict: PASS; replay tools that started again: charge (+1), lookup (+1)", verdict
    lying = run(apps.lying_status)
    verdict = format_text(lying).splitlines()[-1]
    assert verdict == "verdict: FAIL, 2 violations; replay tools that started again: lookup (+1)", verdict
    assert json.loads(format_json(charged))["started_again"] == {"charge": 1, "lookup": 1}


def test_strict_fails_every_extra_start_even_of_a_replay_tool() -> None:
    strict = run(apps.clean, strict=True)
    assert not strict.passed and {(v.rule, v.tool) for v in strict.violations} == {("extra-start", "lookup")}
    assert strict.tools["lookup"].failing and not strict.tools["charge"].failing
    assert format_text(strict).splitlines()[-1].startswith(f"verdict: FAIL, {len(strict.violations)} violations")


def test_a_tool_flagged_at_most_once_in_the_app_fails_on_an_extra_start() -> None:
    tool = apps.double_charge.tools.tools["charge"]
    tool.at_most_once = True  # type: ignore[attr-defined]
    try:
        report = run(apps.double_charge)
    finally:
        del tool.at_most_once  # type: ignore[attr-defined]
    assert {v.tool for v in report.violations} == {"charge"} and report.tools["charge"].failing


def test_a_reconnect_tool_whose_status_lies_is_caught_by_the_starts_count() -> None:
    report = run(apps.lying_status)
    assert not report.passed
    assert {(v.rule, v.tool, v.boundary) for v in report.violations} == {
        ("extra-start", "reserve", "#12 reserve attempt 1, after_tool_effect"),
        ("extra-start", "reserve", "#13 v6 (reserve) finalize, before_write"),
    }
    assert "reserve (reconnect) started 1 more time(s)" in report.violations[0].message


def test_a_tool_that_raises_at_one_boundary_is_reported_with_it() -> None:
    report = run(apps.raises_on_rerun)
    assert {(v.rule, v.tool, v.boundary) for v in report.violations} == {
        ("tool-raised", "lookup", "#7 lookup attempt 1, after_tool_effect"),
        ("tool-raised", "lookup", "#8 v4 (lookup) call_result, before_write"),
    }
    assert "RuntimeError: duplicate lookup request" in report.violations[0].message


def test_a_non_deterministic_model_is_refused() -> None:
    with pytest.raises(NotDeterministic, match=r"differ at commit v2 \(step 1, its messages\)"):
        crashtest(apps.random_model)


def test_a_sequential_delegation_is_refused_by_name() -> None:
    ask = apps.Tool("ask", ToolPolicy(sequential_delegation=True))
    asks = RuntimeApp(name="asks", model=apps.Model(), tools=ToolRegistry({"ask": ask}))
    with pytest.raises(CrashTestRefused, match="tool 'ask' of app 'asks' is a sequential delegation"):
        crashtest(asks)


def test_scripted_turns_cannot_replace_a_push_hosts_own_model() -> None:
    with pytest.raises(CrashTestRefused, match="calls its own model"):
        crashtest(apps.push_clean, Scenario(turns=(Turn("hi", end=EndCauseKind.COMPLETED),)))


def test_scripted_turns_and_answers_replace_the_model_and_the_operator() -> None:
    denied = Scenario(
        "deny-the-charge",
        ("charge me",),
        (Turn("charging", (("charge", {"cents": 1}),)), Turn("ok", end=None)),
        (Answer("deny", "too much"),),
    )
    report = run(apps.random_model, scenarios=denied)  # its own model is never asked
    assert report.passed, report.violations
    assert report.tools["charge"].operations == 0  # denied: it never started
    cancelled = Scenario("cancel", turns=(Turn("charging", (("charge", {"cents": 1}),)),), answers=(Answer("cancel"),))
    report = run(apps.clean, scenarios=cancelled)
    assert report.passed and {t.outcome for t in report.trials} == {"cancelled"}


# --- the command ----------------------------------------------------------------------


def test_the_command_on_the_demo_app_prints_its_report_and_exits_0(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUNKERNEL_DEMO_LEDGER": str(tmp_path / "ledger.db")}
    done = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "crashtest", "--app", "examples.demo_app:app"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("runkernel crashtest: app demo, scenarios approve-every-wait\n")
    assert "lookup (replay): up to 1 extra start per operation — declare it reconnect or indeterminate" in done.stdout
    assert "reserve (reconnect): no extra start" in done.stdout
    assert done.stdout.endswith("verdict: PASS; replay tools that started again: lookup (+1)\n")
    assert "crashtest: 25/25 crashes" in done.stderr  # progress goes to stderr


@pytest.mark.parametrize(
    ("app", "code", "said"),
    [
        ("clean", 0, "verdict: PASS"),
        ("lying_status", 1, "#12 reserve attempt 1, after_tool_effect: extra-start [reserve]"),
        ("raises_on_rerun", 1, "#7 lookup attempt 1, after_tool_effect: tool-raised [lookup]"),
    ],
)
def test_the_command_exits_0_or_1_naming_boundary_and_tool(
    capsys: pytest.CaptureFixture[str], app: str, code: int, said: str
) -> None:
    got, out, _ = cli(capsys, "--app", f"crashtest_apps:{app}")
    assert (got, said in out) == (code, True), out


def test_the_command_fails_with_strict_on_a_replay_tools_extra_start(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "--app", "crashtest_apps:clean")
    assert code == 0 and out.endswith("verdict: PASS; replay tools that started again: lookup (+1)\n"), out
    code, out, _ = cli(capsys, "--app", "crashtest_apps:clean", "--strict")
    assert code == 1 and "extra-start [lookup]" in out and "\nverdict: FAIL, " in out, out


def test_help_shows_at_most_once_and_strict(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["crashtest", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--at-most-once TOOL" in shown and "--strict" in shown
    assert "every extra start fails" in shown  # --strict's help


def test_the_command_exits_2_for_a_non_deterministic_app_and_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "--app", "crashtest_apps:random_model")
    assert (code, out) == (2, "")
    assert "differ at commit v2" in err and "not deterministic" in err
    code, _, err = cli(capsys, "--app", "crashtest_apps:clean", "--at-most-once", "nope")
    assert code == 2 and "at-most-once tool 'nope' is not a tool of app 'clean'" in err
    code, _, err = cli(capsys, "--app", "crashtest_apps:clean", "--scenario", "nope")
    assert code == 2 and "--scenario nope: no such scenario" in err
    code, _, err = cli(capsys, "--app", "crashtest_apps:nothing")
    assert code == 2 and "has no attribute 'nothing'" in err


def test_the_json_report_and_a_scenario_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = [
        {
            "name": "deny",
            "messages": ["charge me"],
            "turns": [{"text": "charging", "calls": [{"tool": "charge", "arguments": {"cents": 1}}]}],
            "answers": [{"deny": "no"}],
        },
        {"name": "input-free", "answers": ["approve"]},
    ]
    jsonschema.validate(scenario, json.loads(scenario_schema()))
    path = tmp_path / "scenarios.json"
    path.write_text(json.dumps(scenario))
    code, out, err = cli(capsys, "--app", "crashtest_apps:clean", "--scenario", str(path), "--format", "json")
    report = json.loads(out)
    print({k: report[k] for k in ("passed", "crashes", "boundaries", "recoveries")})
    assert code == 0 and report["passed"] is True and report["violations"] == []
    assert report["scenarios"] == ["deny", "input-free"] and set(report["boundaries"]) == {"deny", "input-free"}
    assert report["tools"]["lookup"]["most_extra"] == 1
    assert {t["kind"] for t in report["trials"]} == {"before_write", "after_write_before_ack", "after_tool_effect"}


def test_a_bad_scenario_file_is_refused_with_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = {"name": "x", "answers": ["maybe"]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json.loads(scenario_schema()))
    with pytest.raises(BadScenario, match=r"answers\[0\]: 'maybe'"):
        scenarios_from_json(json.dumps(bad))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    code, _, err = cli(capsys, "--app", "crashtest_apps:clean", "--scenario", str(path))
    assert code == 2 and "bad.json.answers[0]" in err


def test_a_scratch_store_is_emptied_and_a_run_store_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scratch = f"sqlite:///{tmp_path / 'scratch.db'}"
    for _ in range(2):  # the second time the store holds the first test's Threads only
        code, out, _ = cli(capsys, "--app", "crashtest_apps:push_clean", "--store", scratch)
        assert code == 0, out
    runs = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["start", "--store", runs, "--thread", "t1", "--app", "clean", "hello"]) == 0
    capsys.readouterr()
    code, _, err = cli(capsys, "--app", "crashtest_apps:clean", "--store", runs)
    assert code == 2 and "holds Runs that crashtest did not create (thread 't1')" in err


# --- child Runs, result values, timers --------------------------------------------------


@pytest.mark.parametrize("app", [apps.delegating, apps.push_delegating], ids=lambda a: a.name)
def test_a_delegating_app_is_crashed_in_its_children_too_and_passes(app: object) -> None:
    report = run(app)
    assert report.passed, report.violations
    children = {t.boundary.split(" ", 2)[1] for t in report.trials if t.boundary.startswith("child ")}
    assert children == {"research[1.0]", "research[1.1]"}
    assert {t.position for t in report.trials if t.boundary.startswith("child ")} >= {
        "activation", "batch_open", "call_start", "call_result", "finalize", "end"
    }
    assert {t.outcome for t in report.trials} == {"completed"}
    assert report.tools["research"].policy == "delegation" and report.tools["research"].most_extra == 0
    assert report.tools["lookup"].most_extra == 1 and report.tools["reserve"].most_extra == 0
    assert report.tools["lookup"].operations == 2  # one per child


def test_a_lying_status_in_a_childs_tool_is_reported_with_the_childs_boundary() -> None:
    report = run(apps.delegating_lying)
    assert not report.passed
    assert {(v.rule, v.tool, v.boundary.split(" ", 1)[1]) for v in report.violations} == {
        ("extra-start", "reserve", f"child research[1.{n}] {where}")
        for n in (0, 1)
        for where in ("reserve attempt 1, after_tool_effect", "v6 (reserve) finalize, before_write")
    }


def test_a_replayed_tool_that_returns_another_value_is_reported_where_it_did() -> None:
    report = run(apps.counting)
    assert {(v.rule, v.tool, v.boundary) for v in report.violations} == {
        ("result-value", "lookup", "#7 lookup attempt 1, after_tool_effect"),
        ("result-value", "lookup", "#8 v4 (lookup) call_result, before_write"),
    }
    assert '"runs": 2' in report.violations[0].message and '"runs": 1' in report.violations[0].message
    assert "step 1 call 0 (lookup" in report.violations[0].message


def test_a_value_the_crash_free_plays_did_not_reproduce_is_not_compared() -> None:
    tool = apps.counting.tools.tools["lookup"]
    plays = iter(range(1000))
    original = tool.run

    def differs_every_play(call: RunCall) -> ToolReply:
        reply = original(call)
        if call.attempt == 1 and not apps.LEDGER[:-1]:  # the Run's first start: a new value per play
            return Returned({"play": next(plays)})
        return reply

    tool.run = differs_every_play  # type: ignore[method-assign]
    try:
        report = run(apps.counting)
    finally:
        del tool.run
    assert [v for v in report.violations if v.rule == "result-value" and "play" in v.message] == []


def test_a_timer_fires_when_the_clock_reaches_its_due_time_and_takes_no_answer() -> None:
    report = run(apps.scheduled)
    assert report.passed, report.violations
    assert {t.outcome for t in report.trials} == {"completed"}
    assert "call_awaiting" in report.recoveries  # crashes while the timer waited
    denied = run(apps.scheduled, scenarios=Scenario("deny", answers=(Answer("deny", "no"),)))
    assert denied.passed, denied.violations
    assert denied.tools["charge"].operations == 0  # the deny answered the charge's approval, not the timer
    assert apps.LEDGER.count(("lookup", "op-ct-2", 2)) == 1  # the last play's lookup ran again once, when due
