""""Fork from here" on a Run's timeline: the console forks as ``runkernel fork`` does
(a new Thread, a new ticket for the waiting call, the source unchanged), behind the same
credential and CSRF rules as every form; the fork's page says where it came from; a
refused fork writes nothing; a read-only console offers no fork."""

from __future__ import annotations

from pathlib import Path

import pytest

# first: without the ui extra it skips this module, before anything imports starlette
from ui_support import SAME_ORIGIN, TOKEN, client, demo_store, form_values

from runkernel.adapters.stores.registry import open_store
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.state import Awaiting
from runkernel.kernel.values import JsonValue
from runkernel.ui.security import csrf_value


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return demo_store(tmp_path, monkeypatch)


def _facts(url: str) -> tuple[list[str], list[dict[str, JsonValue]], str]:
    """The store's Threads, the demo Run's commits and its ticket."""
    store = open_store(url, create=False, read_only=True)
    try:
        snapshot = store.run("run-demo")
        assert snapshot is not None and isinstance(snapshot.state, Awaiting)
        lines = [commit_to_json(c) for c in store.commits(snapshot.thread_id)]
        return store.thread_ids(), lines, snapshot.state.ticket.ticket_id
    finally:
        store.close()


def test_fork_from_the_latest_version_waits_on_a_new_ticket_and_leaves_the_source(demo: str) -> None:
    browser = client(demo)
    page = browser.get("/run?id=run-demo").text
    versions = [int(v) for v in form_values(page, "at")]
    assert versions and versions == sorted(versions)  # one "fork from here" per commit of the timeline
    threads, lines, ticket = _facts(demo)
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "at": str(versions[-1])}
    answer = browser.post("/actions/fork", data=data, headers=SAME_ORIGIN)
    assert answer.status_code == 200
    assert 'id="forked-from"' in answer.text and "run-demo" in answer.text
    assert f"forked from version {versions[-1]} of its source" in answer.text
    after, same_lines, same_ticket = _facts(demo)
    assert same_lines == lines and same_ticket == ticket  # the source never changed
    (new_thread,) = set(after) - set(threads)
    store = open_store(demo, create=False, read_only=True)
    try:
        (first,) = list(store.commits(new_thread))
    finally:
        store.close()
    assert first.forked_from is not None and first.forked_from.run_id == "run-demo"
    assert isinstance(first.disposition, Awaiting) and first.disposition.ticket.ticket_id != ticket
    print(f"forked run-demo at version {versions[-1]} into {new_thread}: awaiting on a new ticket")


def test_a_fork_without_the_csrf_value_or_from_another_origin_writes_nothing(demo: str) -> None:
    browser = client(demo)
    threads, _, _ = _facts(demo)
    data = {"run_id": "run-demo", "at": "1"}
    assert browser.post("/actions/fork", data=data, headers=SAME_ORIGIN).status_code == 403
    good = {**data, "csrf": csrf_value(TOKEN)}
    assert browser.post("/actions/fork", data=good, headers={"origin": "http://evil.example"}).status_code == 403
    assert client(demo, token=None).post("/actions/fork", data=good, headers=SAME_ORIGIN).status_code == 403
    assert _facts(demo)[0] == threads


def test_a_refused_fork_says_why_and_writes_nothing(demo: str) -> None:
    browser = client(demo)
    threads, _, _ = _facts(demo)
    base = {"csrf": csrf_value(TOKEN), "run_id": "run-demo"}
    refused = browser.post("/actions/fork", data={**base, "at": "999"}, headers=SAME_ORIGIN)
    assert refused.status_code == 409 and "no commit at version 999" in refused.text
    assert browser.post("/actions/fork", data={**base, "at": "x"}, headers=SAME_ORIGIN).status_code == 400
    assert _facts(demo)[0] == threads


def test_a_read_only_console_offers_no_fork(demo: str) -> None:
    browser = client(demo, read_only=True)
    assert form_values(browser.get("/run?id=run-demo").text, "at") == []
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "at": "1"}
    assert browser.post("/actions/fork", data=data, headers=SAME_ORIGIN).status_code in (404, 405)
