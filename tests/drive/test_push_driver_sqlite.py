"""The push-mode driver on SQLite across processes: a host killed mid-call, picked up by
another process from the file alone, with only the names ``runkernel`` exports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import runkernel
from runkernel import CallRequest, CheckStatus, Done, Infer, OperationStatus, RunCall
from runkernel.specs.checker import Verdict

HOST = textwrap.dedent(
    """
    import json, os, sys
    from runkernel import CallRequest, Driver, RunCall, ToolPolicy, open_store

    store_url, downstream, tool = sys.argv[1], sys.argv[2], sys.argv[3]
    tools = {
        "charge": ToolPolicy.reconnect(),
        "fetch": ToolPolicy.replay(),
        "email": ToolPolicy.indeterminate(),
    }
    driver = Driver(open_store(store_url), tools)
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("calling", [CallRequest(tool, {"amount": 5})])
    assert isinstance(action, RunCall)
    with open(downstream, "a") as record:  # the tool's effect happens downstream ...
        record.write(json.dumps([action.operation_id, action.attempt]) + "\\n")
    os._exit(9)  # ... and the host dies before it can report it
    """
)

TOOLS = {
    "charge": runkernel.ToolPolicy.reconnect(),
    "fetch": runkernel.ToolPolicy.replay(),
    "email": runkernel.ToolPolicy.indeterminate(),
}


def killed_host(tmp_path: Path, tool: str) -> tuple[str, Path]:
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    downstream = tmp_path / "downstream.jsonl"
    died = subprocess.run([sys.executable, "-c", HOST, url, str(downstream), tool], capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    return url, downstream


def starts(downstream: Path) -> list[list[object]]:
    return [json.loads(line) for line in downstream.read_text().splitlines()]


@pytest.mark.parametrize("tool", ["charge", "fetch", "email"])
def test_another_process_picks_up_a_host_killed_mid_call(tmp_path: Path, tool: str) -> None:
    url, downstream = killed_host(tmp_path, tool)
    [(operation_id, attempt)] = starts(downstream)
    store = runkernel.open_store(url)
    driver = runkernel.Driver(store, TOOLS)
    action = driver.pick_up("r1")
    if tool == "charge":
        assert isinstance(action, CheckStatus)
        assert (action.tool, action.operation_id, action.attempt) == ("charge", operation_id, 1)
        action = driver.status(action.call_id, OperationStatus.DONE, {"charged": 5})
    elif tool == "fetch":
        assert isinstance(action, RunCall) and (action.operation_id, action.attempt) == (operation_id, 2)
        action = driver.call_returned(action.call_id, {"fetched": True})
    assert isinstance(action, Infer)
    last = action.messages[-1].content
    if tool == "email":
        assert last == {"kind": "indeterminate", "reason": "outcome_unknown", "operation_id": operation_id}
    else:
        assert isinstance(last, dict) and last["kind"] == "output"
    done = driver.inferred("finished", end=runkernel.EndCauseKind.COMPLETED)
    assert isinstance(done, Done) and done.final == "finished"
    assert starts(downstream) == [[operation_id, attempt]], "the killed attempt is the only one downstream"
    assert runkernel.check_trace(store.commits("t1")).verdict is Verdict.LEGAL
    store.close()
    answer = {"charge": "asked for its status", "fetch": "replayed as attempt 2", "email": "made Indeterminate"}
    print(f"push driver on SQLite, {tool}: host killed mid-call; another process {answer[tool]}; 1 start downstream")


def test_a_new_run_can_follow_in_the_same_thread_from_another_process(tmp_path: Path) -> None:
    url, _ = killed_host(tmp_path, "email")
    store = runkernel.open_store(url)
    first = runkernel.Driver(store, TOOLS)
    first.pick_up("r1")
    first.inferred("finished", end=runkernel.EndCauseKind.COMPLETED)
    store.close()
    again = runkernel.open_store(url)
    second = runkernel.Driver(again, TOOLS)
    action = second.start(["more"], thread_id="t1", run_id="r2")
    assert isinstance(action, Infer) and len(action.messages) == 5
    action = second.inferred("ok", [CallRequest("fetch", {})])
    assert isinstance(action, RunCall)
    again.close()
