"""``runkernel upgrade-check`` on SQLite and PostgreSQL: the old app's live Runs
(Awaiting an approval, Executing a call a push driver started and never answered, a
parent and its running child, sleeping on a timer) checked against new versions of the
app (a renamed prompt, a renamed tool, a removed tool, a changed policy, no gate), as a
table and as JSON, with exit 0 only when every live Run can continue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import upgrade_apps
from postgres_support import postgres_url
from runkernel.adapters.stores.registry import open_store
from runkernel.adapters.worker.apps import version_of
from runkernel.adapters.worker.loop import Worker
from runkernel.cli import upgrade_command
from runkernel.cli.entry import main
from runkernel.kernel.state import Awaiting

CHILD = "r-parent.op-c-research.run"
__all__ = ["postgres_url"]  # a fixture the store_url fixture asks for

LIVE = {"r-awaiting", "r-executing", "r-parent", CHILD, "r-timer", "r-search"}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store holding the old app's live Runs (and an Ended Run, and another app's Run)."""
    url: str = f"sqlite:///{tmp_path / 'runs.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    store = open_store(url, create=True)
    try:
        assert upgrade_apps.leave_live_runs(store)["child"] == CHILD
    finally:
        store.close()
    yield url


def check(capsys: pytest.CaptureFixture[str], url: str, app: str, *more: str) -> tuple[int, str, str]:
    code = main(["upgrade-check", "--store", url, "--app", f"upgrade_apps:{app}", *more])
    out, err = capsys.readouterr()
    return code, out, err


def rows(capsys: pytest.CaptureFixture[str], url: str, app: str) -> tuple[int, dict[str, dict[str, Any]]]:
    code, out, _ = check(capsys, url, app, "--format", "json")
    report = json.loads(out)
    return code, {row["run_id"]: row for row in report["runs"]}


def test_blocks_a_removed_tool_with_an_open_call_and_passes_a_renamed_prompt(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    new_prompt = upgrade_apps.renamed_prompt
    assert new_prompt.prompt != upgrade_apps.app.prompt and new_prompt.tools == upgrade_apps.app.tools
    code, out, err = check(capsys, store_url, "renamed_prompt")
    assert code == 0, out + err
    assert out.endswith("6 live runs of app shop: 6 can continue, 0 blocked\n")
    assert "blocked:" not in out and "policy:" not in out
    code, out, err = check(capsys, store_url, "removed_tool")
    assert code == 1 and err == ""
    assert "r-awaiting" in out and "blocked: call c-pay (Awaiting) needs tool 'pay', which the new app does not have" in out
    assert out.endswith("6 live runs of app shop: 5 can continue, 1 blocked\n")


def test_every_live_run_is_listed_once_and_ended_runs_and_other_apps_never(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = check(capsys, store_url, "app", "--format", "json")
    report = json.loads(out)
    assert set(report) == {"app", "version", "runs", "continue", "blocked", "accepted"}
    assert (report["app"], report["version"], report["continue"], report["blocked"], report["accepted"]) == (
        "shop", version_of(upgrade_apps.app), len(LIVE), 0, None
    )
    listed = {row["run_id"]: row for row in report["runs"]}
    assert set(listed) == LIVE
    assert listed["r-awaiting"]["state"] == "awaiting" and listed["r-executing"]["state"] == "running"
    assert all(row["verdict"] == "continue" and row["reasons"] == [] for row in listed.values())


def test_a_renamed_tool_blocks_only_the_run_with_an_open_call_of_it(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, listed = rows(capsys, store_url, "renamed_tool")
    assert code == 1
    assert {run for run, row in listed.items() if row["verdict"] == "blocked"} == {"r-search"}
    assert listed["r-search"]["reasons"] == [
        "call c-search (Executing) needs tool 'search', which the new app does not have"
    ]


def test_a_changed_policy_is_reported_for_the_executing_call_and_does_not_block(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, listed = rows(capsys, store_url, "changed_policy")
    assert code == 0
    [difference] = listed["r-executing"]["policy_differences"]
    assert difference == {
        "call_id": "c-fetch",
        "tool": "fetch",
        "committed": {"recovery": "reconnect", "max_attempts": 3, "retries": 0},
        "declared": {"recovery": "replay", "max_attempts": 5, "retries": 0},
        "governs": "committed",
    }
    assert all(row["policy_differences"] == [] for run, row in listed.items() if run != "r-executing")
    code, out, _ = check(capsys, store_url, "changed_policy")
    assert "    policy: call c-fetch (fetch) keeps its committed reconnect; the new code declares replay(max_attempts=5)" in out


def test_a_gateless_app_blocks_the_approval_and_not_the_timer_and_the_group_is_shown(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, listed = rows(capsys, store_url, "no_gate")
    assert code == 1
    assert [run for run, row in listed.items() if row["verdict"] == "blocked"] == ["r-awaiting"]
    assert listed["r-timer"]["notes"] == [f"it sleeps until {upgrade_apps.DUE} (call c-remind, remind then runs)"]
    assert listed["r-parent"]["group"] == [CHILD] and listed[CHILD]["group"] == ["r-parent"]


def test_usage_errors_exit_2_with_one_line(
    store_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in (
        ["upgrade-check", "--store", store_url, "--app", "upgrade_apps"],
        ["upgrade-check", "--store", store_url, "--app", "upgrade_apps:nothing_here"],
        ["upgrade-check", "--store", store_url, "--app", "upgrade_apps:dynamic", "--accept"],
        ["upgrade-check", "--store", "memory:", "--app", "upgrade_apps:app"],
        ["upgrade-check", "--store", store_url],
        ["upgrade-check", "--store", f"sqlite:///{tmp_path / 'missing.db'}", "--app", "upgrade_apps:app"],
    ):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, (argv, err)


def test_the_new_apps_name_picks_the_runs_it_checks(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(capsys, store_url, "other", "--format", "json")
    assert code == 0
    assert [row["run_id"] for row in json.loads(out)["runs"]] == ["r-other"]


def test_progress_goes_to_stderr_when_there_are_many_runs(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upgrade_command, "PROGRESS_FROM", 2)
    code, out, err = check(capsys, store_url, "app", "--format", "json")
    assert code == 0 and json.loads(out)["continue"] == len(LIVE)
    assert "upgrade-check: 6/6 runs checked" in err


# --- --accept --------------------------------------------------------------------------


def _compatible(url: str, app: Any) -> frozenset[str]:
    store = open_store(url)
    try:
        return store.compatible_versions(upgrade_apps.APP, version_of(app))
    finally:
        store.close()


def _with_versions(url: str, *versions: str) -> None:
    store = open_store(url)
    try:
        upgrade_apps.leave_versioned_runs(store, versions)
    finally:
        store.close()


def test_accept_records_the_new_version_able_to_drive_the_versions_it_checked(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_versions(store_url, "v1", "v2")
    old, new = version_of(upgrade_apps.app), version_of(upgrade_apps.changed_policy)
    assert new not in (old, "v1", "v2")
    code, listed = rows(capsys, store_url, "changed_policy")
    assert {row["app_version"] for row in listed.values()} == {old, "v1", "v2"}  # the drivers recorded the old one
    assert _compatible(store_url, upgrade_apps.changed_policy) == {new}
    code, out, err = check(capsys, store_url, "changed_policy", "--accept")
    assert (code, err) == (0, "")
    drives = ", ".join(sorted((old, "v1", "v2")))
    assert out.endswith(
        "8 live runs of app shop: 8 can continue, 0 blocked\n"
        f"accepted: workers of shop version {new} may drive runs of {drives}\n"
    )
    assert _compatible(store_url, upgrade_apps.changed_policy) == {new, old, "v1", "v2"}
    code, out, _ = check(capsys, store_url, "changed_policy", "--accept", "--format", "json")
    report = json.loads(out)
    assert (code, report["version"], report["accepted"]) == (0, new, sorted((old, "v1", "v2")))  # again: no change
    assert _compatible(store_url, upgrade_apps.changed_policy) == {new, old, "v1", "v2"}
    assert _compatible(store_url, upgrade_apps.removed_tool) == {version_of(upgrade_apps.removed_tool)}


def test_accept_is_refused_when_a_run_is_blocked_and_nothing_is_written(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_versions(store_url, "v1")
    code, out, err = check(capsys, store_url, "removed_tool", "--accept")
    assert code == 1
    assert "blocked: call c-pay (Awaiting) needs tool 'pay'" in out and "accepted:" not in out
    assert err.splitlines() == [
        "runkernel upgrade-check: --accept refused: 2 live run(s) of app 'shop' cannot be continued by version "
        f"{version_of(upgrade_apps.removed_tool)!r} (r-v-v1, r-awaiting); nothing recorded"
    ]
    assert _compatible(store_url, upgrade_apps.removed_tool) == {version_of(upgrade_apps.removed_tool)}
    code, out, _ = check(capsys, store_url, "removed_tool", "--accept", "--format", "json")
    assert code == 1 and json.loads(out)["accepted"] is None


def test_accept_of_a_new_prompt_records_nothing_its_version_is_the_old_one(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert version_of(upgrade_apps.renamed_prompt) == version_of(upgrade_apps.app)  # the tool table's digest
    code, out, err = check(capsys, store_url, "renamed_prompt", "--accept")
    assert (code, err) == (0, "")
    assert out.endswith(
        f"accepted: nothing to record; no live run of app shop recorded a version other than "
        f"{version_of(upgrade_apps.renamed_prompt)}\n"
    )
    assert _compatible(store_url, upgrade_apps.renamed_prompt) == {version_of(upgrade_apps.renamed_prompt)}


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url: str = f"sqlite:///{tmp_path / 'demo.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    return url


def test_after_accept_a_worker_of_the_new_version_drives_the_old_versions_run(
    empty_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.demo_app import app as old_app

    monkeypatch.setenv("RUNKERNEL_DEMO_LEDGER", str(tmp_path / "ledger.db"))
    new_app = upgrade_apps.demo_retrying()
    assert main(["start", "--store", empty_url, "--thread", "t1", "--run", "r1", "--app", "examples.demo_app:app", "book"]) == 0
    store = open_store(empty_url)
    try:
        assert Worker(store, old_app, concurrency=1).run_once().drives == 1
        snapshot = store.run("r1")
        assert snapshot is not None and isinstance(snapshot.state, Awaiting)
        ticket = snapshot.state.ticket.ticket_id
        assert main(["resume", "--store", empty_url, "r1", "--ticket", ticket, "--approve"]) == 0
        before = Worker(store, new_app, concurrency=1).run_once()
        assert before.drives == 0 and store.list_runs()[0].state == "awaiting"  # not its version
        capsys.readouterr()
        assert main(["upgrade-check", "--store", empty_url, "--app", "upgrade_apps:demo_retrying", "--accept"]) == 0
        said = capsys.readouterr().out
        assert said.endswith(
            f"accepted: workers of demo version {version_of(new_app)} may drive runs of {version_of(old_app)}\n"
        )
        after = Worker(store, new_app, concurrency=1).run_once()
        [summary] = store.list_runs()
    finally:
        store.close()
    print(f"new version's worker: {before.drives} drives before --accept, {after.drives} after; run {summary.state}")
    assert after.drives == 1 and summary.state == "ended" and summary.app_version == version_of(old_app)
