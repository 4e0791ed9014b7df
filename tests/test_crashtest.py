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

from runkernel import EndCauseKind
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
    format_text,
    scenario_schema,
    scenarios_from_json,
)
import crashtest_apps as apps

ROOT = Path(__file__).resolve().parent.parent


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
    assert done.stdout.endswith("verdict: PASS\n")
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
