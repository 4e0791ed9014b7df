"""What an operator sees of app versions (Versions, under Workers and leases): ``runkernel
runs`` (text and JSON), ``inspect`` and the console show each Run's app version and,
for a Run that is not Ended, why no worker may drive it: no live worker of its app, or
none of a compatible version; an accepted compatibility, or a live worker of the Run's
own version, clears it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.versions import NO_LIVE_WORKER
from runkernel.cli.entry import main
from runkernel.conformance.runs import text_run
from ui_support import client


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def _runs(capsys: pytest.CaptureFixture[str], url: str) -> dict[str, dict[str, Any]]:
    code, out = _cli(capsys, "runs", "--store", url, "--format", "json")
    assert code == 0
    return {row["run_id"]: row for row in json.loads(out)}


def test_runs_inspect_and_the_console_say_why_no_worker_drives_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    store = SqliteStore(path)
    store.append(text_run("t-old", "r-old", 2, app="shop", app_version="v1")[0])
    store.append(text_run("t-new", "r-new", 2, app="shop", app_version="v2")[0])
    store.append(text_run("t-legacy", "r-legacy", 2, app="shop")[0])
    for commit in text_run("t-done", "r-done", 1, app="shop", app_version="v1"):
        store.append(commit)
    rows = _runs(capsys, url)
    assert {r: (row["app_version"], row["not_driven"]) for r, row in rows.items()} == {
        "r-old": ("v1", NO_LIVE_WORKER),
        "r-new": ("v2", NO_LIVE_WORKER),
        "r-legacy": (None, NO_LIVE_WORKER),
        "r-done": ("v1", None),  # ended: nothing left to drive
    }
    store.register_worker("w-new", "shop", "v2")
    store.register_worker("w-other", "billing", "v1")  # another app's worker drives none of these
    rows = _runs(capsys, url)
    assert rows["r-new"]["not_driven"] is None and rows["r-legacy"]["not_driven"] is None
    assert "no live worker of a compatible version" in rows["r-old"]["not_driven"]
    assert "live: v2" in rows["r-old"]["not_driven"]
    code, text = _cli(capsys, "runs", "--store", url)
    assert code == 0 and "APP VERSION" in text.splitlines()[0] and "NOT DRIVEN" in text.splitlines()[0]
    (old_line,) = [line for line in text.splitlines() if line.startswith("r-old")]
    assert " v1 " in old_line and "compatible version" in old_line
    code, text = _cli(capsys, "inspect", "--store", url, "r-old")
    assert code == 0 and "app shop, version v1; not driven: no live worker of a compatible version" in text
    with client(url, read_only=True) as ui:
        page = ui.get("/run", params={"id": "r-old"}).text
        assert 'id="app-version">v1<' in page and "Not driven: no live worker of a compatible version" in page
        assert 'class="app-version">v2<' in ui.get("/").text
    # the operator records v2 compatible with v1: nothing is left undriven
    store.accept_versions("shop", "v2", ["v1"])
    assert all(row["not_driven"] is None for row in _runs(capsys, url).values())
    code, text = _cli(capsys, "inspect", "--store", url, "r-old")
    assert "not driven" not in text
    store.forget_worker("w-new")
    assert _runs(capsys, url)["r-new"]["not_driven"] == NO_LIVE_WORKER
    store.close()


def test_start_and_worker_take_the_version_of_the_app_they_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rolling_app import v2
    from runkernel.adapters.worker.apps import version_of

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--run", "loaded", "--app", "rolling_app:v2", "go"]) == 0
    assert main(["start", "--store", url, "--thread", "t2", "--run", "named", "--app", "rolling", "go"]) == 0
    capsys.readouterr()
    rows = _runs(capsys, url)
    assert rows["loaded"]["app_version"] == version_of(v2) and rows["loaded"]["app"] == "rolling"
    assert rows["named"]["app_version"] is None, "a name alone says nothing of the code"
    for argv in (
        ["start", "--store", url, "--thread", "t3", "--app", "rolling_app:mcp_unversioned", "go"],
        ["worker", "--store", url, "--app", "rolling_app:mcp_unversioned", "--once"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "declare its version" in err, err
    assert set(_runs(capsys, url)) == {"loaded", "named"}
