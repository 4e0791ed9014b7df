"""``runkernel fork``: a new Thread from a Run's committed state, driven to its end by a
worker of the source's app; a refusal is one line on stderr naming the calls (exit 1);
a usage error is exit 2. The tools record every start, so the test sees that the fork
reruns the replay call under a new operation id and never starts the indeterminate call
the source left Executing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runkernel import CallRequest, Driver, RunCall, Worker, open_store
from runkernel.adapters.worker.apps import load_app
from runkernel.cli.entry import main

APP_MODULE = '''
from runkernel import EndCauseKind, ModelReply, Returned, RuntimeApp, ToolPolicy, ToolRegistry

STARTS = []


class Model:
    def infer(self, request):
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Tool:
    def __init__(self, name, policy):
        self.name, self.policy = name, policy

    def run(self, call):
        STARTS.append((self.name, call.operation_id, call.attempt))
        return Returned({"ok": True})

    def status(self, operation_id, lease_epoch=None):
        raise AssertionError("no reconnect tool here")


TOOLS = {"search": ToolPolicy.replay(max_attempts=3), "send": ToolPolicy.indeterminate()}
app = RuntimeApp("shop", Model(), ToolRegistry({name: Tool(name, p) for name, p in TOOLS.items()}))
'''


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "shop_app.py").write_text(APP_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shop_app", raising=False)
    return "shop_app:app"


def _source(url: str, shop: str, until: str) -> tuple[str, int, RunCall]:
    """A Run of the shop app that asked for search then send, dropped with ``until``
    Executing; its run id, latest version and that call."""
    store = open_store(url, create=True)
    load_app(shop)  # imports the app's module, whose TOOLS are the policies
    driver = Driver(store, sys.modules["shop_app"].TOOLS, app="shop")
    driver.start(["buy"], thread_id="source")
    action = driver.inferred("buying", [CallRequest("search", {"q": "x"}), CallRequest("send", {"to": "me"})])
    while not (isinstance(action, RunCall) and action.tool == until):
        assert isinstance(action, RunCall)
        action = driver.call_returned(action.call_id, {"found": 1})
    run_id = driver.run_id
    assert run_id is not None
    snapshot = store.run(run_id)
    assert snapshot is not None
    store.close()
    return run_id, snapshot.version, action


def _starts(shop: str) -> list[tuple[str, str, int]]:
    return list(sys.modules[shop.split(":")[0]].STARTS)


def test_fork_then_a_worker_of_the_app_drives_the_fork_to_its_end(
    tmp_path: Path, shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    run_id, at, search = _source(url, shop, "search")
    assert main(["fork", "--store", url, run_id, "--at", str(at), "--thread", "f1", "--format", "json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["forked_from"] == {"thread_id": "source", "run_id": run_id, "version": at}
    assert made["thread_id"] == "f1" and made["state"] == "running"
    store = open_store(url)
    Worker(store, load_app(shop), concurrency=1).run_once()
    fork_run = store.run(made["run_id"])
    store.close()
    assert fork_run is not None and fork_run.state.__class__.__name__ == "Ended"
    fork_search = [s for s in _starts(shop) if s[0] == "search" and s[1] != search.operation_id]
    print(f"source search op {search.operation_id}; fork starts {fork_search}")
    assert len(fork_search) == 1 and fork_search[0][2] == 1


def test_a_refused_fork_is_one_line_naming_the_call_and_abandoning_never_starts_it(
    tmp_path: Path, shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    run_id, at, send = _source(url, shop, "send")
    assert main(["fork", "--store", url, run_id, "--at", str(at), "--thread", "f2"]) == 1
    said = capsys.readouterr().err.strip()
    print(said)
    assert len(said.splitlines()) == 1 and send.call_id in said and "abandon" in said
    assert main(["fork", "--store", url, run_id, "--at", str(at), "--thread", "f2", "--abandon-open-calls"]) == 0
    out = capsys.readouterr().out
    assert send.call_id in out and "f2" in out
    store = open_store(url)
    Worker(store, load_app(shop), concurrency=1).run_once()
    store.close()
    sends = [s for s in _starts(shop) if s[0] == "send"]
    print(f"send starts after the fork: {sends}")
    assert sends == []  # neither the fork nor the source's recovery starts it again


def test_usage_errors_exit_2_and_an_unknown_run_exits_1(
    tmp_path: Path, shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    run_id, _, _ = _source(url, shop, "search")
    assert main(["fork", "--store", url, run_id, "--at", "0"]) == 2
    assert main(["fork", "--store", url, run_id]) == 2
    assert main(["fork", "--store", url, "no-such-run", "--at", "1"]) == 1
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and "no-such-run" in errors[2]


def test_check_trace_matches_a_fork_with_its_source_in_another_file_whichever_comes_first(
    tmp_path: Path, shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    run_id, at, search = _source(url, shop, "search")
    assert main(["fork", "--store", url, run_id, "--at", str(at), "--thread", "f3"]) == 0
    source, fork_file, tampered = tmp_path / "source.jsonl", tmp_path / "f3.jsonl", tmp_path / "bad.jsonl"
    for thread, path in (("source", source), ("f3", fork_file)):
        capsys.readouterr()
        assert main(["export", "--store", url, thread]) == 0
        path.write_text(capsys.readouterr().out)
    line = json.loads(fork_file.read_text())
    line["batch"]["calls"][0]["operation_id"] = search.operation_id  # the source's: reused
    tampered.write_text(json.dumps(line) + "\n")
    capsys.readouterr()
    assert main(["check-trace", str(fork_file), str(source)]) == 0
    assert main(["check-trace", str(tampered)]) == 0  # alone, a reused id cannot be seen
    assert main(["check-trace", str(source), str(tampered)]) == 1
    captured = capsys.readouterr()
    said = captured.out + captured.err
    print(said)
    assert "fork-carries-source-state" in said and search.operation_id in said
