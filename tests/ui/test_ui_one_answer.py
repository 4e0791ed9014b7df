"""Issue 36, item 2, in the console: a wait takes one answer. The Approvals and One Run
pages show the pending answer and offer no second one; a second, different answer is
refused naming the first, the same one is already queued, as ``runkernel resume`` says
(both queue through ``queue_resume``)."""

from __future__ import annotations

from pathlib import Path

import pytest

# first: without the ui extra it skips this module, before anything imports starlette
from ui_support import SAME_ORIGIN, TOKEN, client, demo_store, form_values
from runkernel.adapters.stores.registry import open_store
from runkernel.cli.entry import main
from runkernel.ui.security import csrf_value


def _pending(url: str) -> list[int]:
    store = open_store(url, create=False, read_only=True)
    try:
        return [e.entry_id for e in store.pending_commands("run-demo")]
    finally:
        store.close()


def test_the_console_shows_the_pending_answer_offers_no_second_and_refuses_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = demo_store(tmp_path, monkeypatch)
    browser = client(url)
    (ticket,) = set(form_values(browser.get("/approvals").text, "ticket_id"))
    answer = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": ticket, "back": "/approvals"}
    approved = browser.post("/actions/resume", data={**answer, "action": "approve"}, headers=SAME_ORIGIN)
    assert approved.status_code == 200 and "queued command 1 (approve)" in approved.text
    for page in (browser.get("/approvals").text, browser.get("/run?id=run-demo").text):
        assert "Answered by command 1 (approve), queued" in page
        assert form_values(page, "ticket_id") == [] and 'value="deny"' not in page, "no form for a second answer"
    denied = browser.post("/actions/resume", data={**answer, "action": "deny"}, headers=SAME_ORIGIN)
    assert denied.status_code == 409 and "already answered by command 1 (approve)" in denied.text
    again = browser.post("/actions/resume", data={**answer, "action": "approve"}, headers=SAME_ORIGIN)
    assert again.status_code == 200 and "already queued as command 1 (approve); nothing new queued" in again.text
    assert _pending(url) == [1]
    capsys.readouterr()
    assert main(["resume", "--store", url, "run-demo", "--ticket", ticket, "--deny"]) == 1
    assert "already answered by command 1 (approve)" in capsys.readouterr().err
    assert _pending(url) == [1]


def test_a_notice_of_an_answer_already_queued_shows_only_its_fixed_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = client(demo_store(tmp_path, monkeypatch))
    page = browser.get("/approvals?notice=already-queued&command=7&action=approve").text
    assert "already queued as command 7 (approve); nothing new queued" in page
    page = browser.get("/approvals?notice=already-queued&command=7&action=<b>x</b>").text
    assert "already queued" not in page
