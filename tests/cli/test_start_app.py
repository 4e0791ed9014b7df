"""``runkernel start --app MODULE:ATTR`` loads the app as ``runkernel worker --app`` does
and records its name, so the worker of that app drives the Run (issue 35: the spec was
taken as an app *name* and no worker ever drove the Run); an app that does not load is
refused with one line, before anything is written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runkernel import Worker, open_store
from runkernel.adapters.worker.apps import load_app
from runkernel.cli.entry import main

APP_MODULE = '''
from runkernel import EndCauseKind, ModelReply, RuntimeApp, ToolRegistry


class Model:
    def infer(self, request):
        return ModelReply("shipped", end=EndCauseKind.COMPLETED)


app = RuntimeApp("orders", Model(), ToolRegistry({}))
'''


@pytest.fixture
def orders_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "orders_app.py").write_text(APP_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "orders_app", raising=False)
    return "orders_app:app"


def test_start_with_module_attr_records_the_app_name_and_its_worker_drives_the_run(
    tmp_path: Path, orders_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--run", "r1", "--app", orders_module, "where?"]) == 0
    store = open_store(url)
    (summary,) = store.list_runs()
    report = Worker(store, load_app(orders_module), concurrency=1).run_once()
    ended = store.list_runs()[0].state
    store.close()
    print(f"recorded app {summary.app!r}; the worker of {orders_module}: {report.drives} drive, Run {ended}")
    assert summary.app == "orders" and report.drives == 1 and ended == "ended"


def test_start_with_an_app_that_does_not_load_is_refused_before_anything_is_written(
    tmp_path: Path, orders_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--app", "orders_app:nope", "where?"]) == 2
    said = capsys.readouterr().err.strip()
    print(said)
    assert len(said.splitlines()) == 1 and "orders_app:nope" in said and "no attribute" in said
    assert not (tmp_path / "orders.db").exists()


def test_start_with_a_plain_name_records_it_as_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--app", "orders", "where?"]) == 0
    store = open_store(url)
    assert [s.app for s in store.list_runs()] == ["orders"]
    store.close()
