"""The console over HTTP (Starlette's TestClient): the access path, the Host header,
cross-site forms, escaping of hostile committed data, read-only mode, refusals that
queue nothing, and what each page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# first: without the ui extra it skips this module, before anything imports starlette
from ui_support import BASE, SAME_ORIGIN, SCRIPT, TOKEN, client, demo_store, drive, form_values

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.registry import open_store
from runkernel.cli.entry import main
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.ui.security import CSP, csrf_value
from postgres_support import postgres_url

ROOT = Path(__file__).resolve().parent.parent.parent
__all__ = ["postgres_url"]  # a fixture


def _pending(url: str, run_id: str) -> int:
    """How many commands wait in the Run's inbox."""
    store = open_store(url, create=False, read_only=True)
    try:
        return len(store.pending_commands(run_id))
    finally:
        store.close()


def _state(url: str, run_id: str) -> str:
    store = open_store(url, create=False, read_only=True)
    try:
        listed = {s.run_id: s.state for s in store.list_runs()}
    finally:
        store.close()
    return listed[run_id]


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return demo_store(tmp_path, monkeypatch)


# --- the access path ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/approvals", "/run?id=run-demo", "/trace?run=run-demo", "/static/live.js"])
def test_every_route_refuses_a_request_without_the_token(demo: str, path: str) -> None:
    answer = client(demo, token=None).get(path)
    assert answer.status_code == 403
    assert "run-demo" not in answer.text and "pay" not in answer.text
    wrong = client(demo, token="not-the-token").get(path)
    assert wrong.status_code == 403


def test_every_page_lives_under_the_access_path_and_links_only_there(demo: str) -> None:
    browser = client(demo, token=None)
    bare = browser.get(BASE, follow_redirects=False)  # the printed URL without its last "/"
    assert bare.status_code == 303 and bare.headers["location"] == f"{BASE}/"
    assert browser.get(f"{BASE}/approvals").status_code == 200
    assert browser.get(f"/{TOKEN[:-1]}/approvals").status_code == 403  # a near guess
    for path in ("/", "/approvals", "/run?id=run-demo"):
        page = client(demo).get(path).text
        links = re.findall(r'(?:href|action|src)="([^"]*)"', page)
        assert links and all(link.startswith(f"{BASE}/") for link in links), (path, links)


def test_an_unknown_host_header_is_refused_as_a_rebinding_page_would_send_it(demo: str) -> None:
    answer = client(demo).get("/", headers={"host": "evil.example:8765"})
    assert answer.status_code == 400


def test_every_answer_carries_a_csp_without_inline_scripts(demo: str) -> None:
    browser = client(demo)
    for path in ("/", "/approvals", "/run?id=run-demo"):
        answer = browser.get(path)
        assert answer.headers["content-security-policy"] == CSP and "'unsafe-inline'" not in CSP
        assert answer.headers["x-frame-options"] == "DENY"
        assert "<script" not in answer.text.replace(f'<script src="{BASE}/static/live.js" defer></script>', "")


# --- the pages ---------------------------------------------------------------------------


def test_runs_lists_the_run_with_what_it_waits_for_and_counts_per_state(demo: str) -> None:
    page = client(demo).get("/").text
    assert f'href="{BASE}/run?id=run-demo"' in page and "approval" in page
    assert 'id="count-awaiting">awaiting: 1<' in page and 'id="count-ended">ended: 0<' in page
    assert "run-demo" not in client(demo).get("/?state=ended").text
    assert "run-demo" in client(demo).get("/?app=demo&state=awaiting").text
    assert "run-demo" not in client(demo).get("/?app=other").text
    assert "run-demo" not in client(demo).get("/?thread=t-other").text
    assert client(demo).get("/?state=bogus").status_code == 400


def test_runs_and_one_run_show_each_runs_lease_by_the_stores_clock(demo: str) -> None:
    """The worker released its lease when the Run went quiet; a held one is shown with
    its holder, epoch and expiry, as ``inspect`` tells them."""
    page = client(demo).get("/").text
    assert "unleased (last held by" in page and "released)" in page
    store = SqliteStore(Path(demo.removeprefix("sqlite:///")))
    try:
        store.acquire_lease("run-demo", "worker-on-duty", 300)
    finally:
        store.close()
    for path in ("/", "/run?id=run-demo"):
        text = client(demo).get(path).text
        assert re.search(r"leased by worker-on-duty \(epoch 2\) until \S+Z, in \d+ s", text), (path, text)


def test_approvals_shows_the_gates_committed_request(demo: str) -> None:
    """The demo app's gate holds ``pay`` with a prompt; the approver reads it."""
    page = client(demo).get("/approvals").text
    assert "pay {" in page and "prompt" in page, page


def test_runs_pages_newest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runkernel.ui import views

    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    url = f"sqlite:///{tmp_path / 'p.db'}"
    for n in range(5):
        assert main(["start", "--store", url, "--thread", f"t{n}", "--run", f"r{n}", "--app", "a", "hi"]) == 0
    browser = client(url)
    seen, address = [], "/"
    while True:
        page = browser.get(address).text
        seen += sorted((f"r{n}" for n in range(5) if f'href="{BASE}/run?id=r{n}"' in page), key=lambda r: page.index(f'/run?id={r}"'))
        if 'id="next-page"' not in page:
            break
        address = page.split('id="next-page" href="')[1].split('"')[0].replace("&amp;", "&").removeprefix(BASE)
    assert seen == ["r4", "r3", "r2", "r1", "r0"]


def test_one_run_answers_the_four_questions_with_calls_timeline_and_diagrams(demo: str) -> None:
    page = client(demo).get("/run?id=run-demo").text
    for question in ("Is it running, waiting, or finished?", "Has the model requested a tool?",
                     "What can resume it?", "Has displayed text become Thread truth?"):
        assert question in page
    assert "book me a table" in page and "Paying the deposit." in page  # committed messages
    for tool in ("lookup", "reserve", "pay"):
        assert f"<td>{tool}</td>" in page
    assert '"recovery": "reconnect"' in page.replace("&#34;", '"')  # the committed policy
    assert 'id="timeline"' in page and "<td>1</td>" in page
    # the diagrams come from the spec, the Run's and each call's current state marked
    assert '<span class="machine-state current">Awaiting ← this Run</span>' in page
    assert "commit ResumeTicket" in page  # an edge label of `runkernel spec`
    assert 'class="machine-state current">Awaiting ← this Run' in page
    assert page.count('class="machine-state current"') == 3  # the Run; calls Finalized and Awaiting
    assert client(demo).get("/run?id=nope").status_code == 404


def test_the_trace_export_is_what_runkernel_export_prints(demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = client(demo).get("/trace?run=run-demo")
    assert answer.status_code == 200 and answer.headers["content-disposition"] == 'attachment; filename="t-run-demo.jsonl"'
    capsys.readouterr()
    assert main(["export", "--store", demo, "t-run-demo"]) == 0
    assert answer.text == capsys.readouterr().out


def test_a_password_in_the_store_url_is_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runkernel.ui.app import Console

    url = demo_store(tmp_path, monkeypatch)
    console = Console(url, TOKEN, hosts=frozenset({"testserver"}))
    console.store_url = url + "?password=hunter2"  # as a PostgreSQL URL carries one
    monkeypatch.setattr(console, "store", _plain_store(url))
    from starlette.testclient import TestClient

    browser = TestClient(console.application(), base_url=f"http://testserver{BASE}/")
    for path in ("/", "/approvals", "/run?id=run-demo"):
        page = browser.get(path).text
        assert "hunter2" not in page and "password=***" in page


def _plain_store(url: str):  # type: ignore[no-untyped-def]
    import contextlib

    @contextlib.contextmanager
    def store(*, write: bool = False):  # type: ignore[no-untyped-def]
        opened = open_store(url, create=False, read_only=not write)
        try:
            yield opened
        finally:
            opened.close()

    return store


# --- hostile committed data ----------------------------------------------------------------


def test_script_in_a_message_a_tool_name_an_argument_and_an_id_renders_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    run_id = f"r{SCRIPT}"
    store = open_store(url)
    try:
        decision = decide(None, Activate(f"t{SCRIPT}", run_id, 0, (Message(Role.USER, SCRIPT),), "hostile"))
        assert not isinstance(decision, Rejection) and decision.commit is not None
        store.append(decision.commit)
    finally:
        store.close()
    drive(url, "hostile_ui_app:app")
    assert _state(url, run_id) == "awaiting"
    browser = client(url)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    for path in ("/", "/approvals", "/run?id=r%3Cscript%3Ealert(1)%3C/script%3E"):
        page = browser.get(path)
        assert page.status_code == 200, path
        assert SCRIPT not in page.text, path
        assert escaped in page.text, path


# --- forms: CSRF, refusals, read-only ---------------------------------------------------------


def test_approve_from_the_approvals_page_queues_what_the_cli_would_and_a_drive_ends_the_run(demo: str) -> None:
    browser = client(demo)
    page = browser.get("/approvals").text
    assert "<dd class=\"tool\">pay</dd>" in page and "&#34;amount&#34;: 20" in page
    (ticket,) = set(form_values(page, "ticket_id"))
    (csrf,) = set(form_values(page, "csrf"))
    answer = browser.post(
        "/actions/resume",
        data={"csrf": csrf, "run_id": "run-demo", "ticket_id": ticket, "action": "approve", "back": "/approvals"},
        headers=SAME_ORIGIN,
    )
    assert answer.status_code == 200 and "queued command 1 (approve); a worker applies it" in answer.text
    assert _pending(demo, "run-demo") == 1
    drive(demo)
    assert _state(demo, "run-demo") == "ended"
    assert 'id="no-waits"' in browser.get("/approvals").text


def test_deny_with_a_reason_reaches_the_run(demo: str) -> None:
    browser = client(demo)
    page = browser.get("/approvals").text
    (ticket,) = set(form_values(page, "ticket_id"))
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": ticket, "action": "deny", "reason": "too dear"}
    assert browser.post("/actions/resume", data=data, headers=SAME_ORIGIN).status_code == 200
    drive(demo)
    assert "too dear" in browser.get("/run?id=run-demo").text


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"ticket_id": "tk_not_the_ticket"}, "ticket-mismatch"),
        ({"action": "input"}, "wait-kind-mismatch"),
    ],
)
def test_a_refused_answer_shows_its_rule_and_queues_nothing(demo: str, change: dict[str, str], rule: str) -> None:
    browser = client(demo)
    (ticket,) = set(form_values(browser.get("/approvals").text, "ticket_id"))
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": ticket, "action": "approve", **change}
    answer = browser.post("/actions/resume", data=data, headers=SAME_ORIGIN)
    assert answer.status_code == 409 and "nothing queued" in answer.text
    assert f'id="refusal">{rule}' in answer.text
    assert _pending(demo, "run-demo") == 0


def test_the_console_refuses_exactly_what_runkernel_resume_refuses(demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["resume", "--store", demo, "run-demo", "--ticket", "tk_not_the_ticket", "--approve"]) == 1
    cli_line = capsys.readouterr().err.strip()
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": "tk_not_the_ticket", "action": "approve"}
    answer = client(demo).post("/actions/resume", data=data, headers=SAME_ORIGIN)
    refusal = answer.text.split('id="refusal">')[1].split("<")[0]
    assert cli_line.endswith(f"refused: {refusal}")


def test_a_form_without_the_csrf_value_or_from_another_origin_is_refused_and_queues_nothing(demo: str) -> None:
    browser = client(demo)
    (ticket,) = set(form_values(browser.get("/approvals").text, "ticket_id"))
    data = {"run_id": "run-demo", "ticket_id": ticket, "action": "approve"}
    assert browser.post("/actions/resume", data=data, headers=SAME_ORIGIN).status_code == 403
    assert browser.post("/actions/resume", data={**data, "csrf": "0" * 64}, headers=SAME_ORIGIN).status_code == 403
    good = {**data, "csrf": csrf_value(TOKEN)}
    assert browser.post("/actions/resume", data=good, headers={"origin": "http://evil.example"}).status_code == 403
    assert browser.post("/actions/resume", data=good).status_code == 403  # no Origin, no Referer
    assert _pending(demo, "run-demo") == 0


def test_read_only_has_no_route_that_writes_and_no_form(demo: str) -> None:
    browser = client(demo, read_only=True)
    page = browser.get("/approvals").text
    assert "<form method=\"post\"" not in page and "read-only" in page
    assert "<form method=\"post\"" not in browser.get("/run?id=run-demo").text
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": "x", "action": "approve"}
    for path in ("/actions/resume", "/actions/reconcile"):
        assert browser.post(path, data=data, headers=SAME_ORIGIN).status_code in (404, 405)
    from runkernel.ui.app import Console

    routes = Console(demo, TOKEN, read_only=True).application().routes
    assert all("POST" not in (getattr(route, "methods", None) or ()) for route in routes)
    assert _pending(demo, "run-demo") == 0


def test_reconcile_an_indeterminate_call_as_runkernel_reconcile_does(demo: str) -> None:
    # a cancel while `pay` awaits approval: the owning Run ends and `pay` is Indeterminate
    assert main(["cancel", "--store", demo, "run-demo"]) == 0
    drive(demo)
    browser = client(demo)
    page = browser.get("/run?id=run-demo").text
    (operation,) = form_values(page, "operation_id")
    listed = browser.get("/approvals").text  # Approvals lists it too, with its form
    assert form_values(listed, "operation_id") == [operation] and "pay is Indeterminate (run_ended)" in listed
    base = {"csrf": csrf_value(TOKEN), "back": "/run?id=run-demo"}
    refused = browser.post("/actions/reconcile", data={**base, "operation_id": "op-nope", "outcome": "applied"}, headers=SAME_ORIGIN)
    assert refused.status_code == 409 and "no Indeterminate call has operation id" in refused.text
    bad = browser.post("/actions/reconcile", data={**base, "operation_id": operation, "outcome": "maybe"}, headers=SAME_ORIGIN)
    assert bad.status_code == 400
    data = {**base, "operation_id": operation, "outcome": "not_applied", "note": f"bank says no {SCRIPT}"}
    answer = browser.post("/actions/reconcile", data=data, headers=SAME_ORIGIN)
    assert answer.status_code == 200 and "recorded not_applied for the Indeterminate call" in answer.text
    assert "1. not_applied (bank says no &lt;script&gt;" in answer.text
    assert 'id="no-indeterminate"' in browser.get("/approvals").text  # reconciled: gone from Approvals
    store = open_store(demo, create=False, read_only=True)
    try:
        assert [(r.outcome, r.note) for r in store.reconciliations(operation)] == [("not_applied", f"bank says no {SCRIPT}")]
    finally:
        store.close()


def test_a_form_cannot_send_the_browser_to_another_site(demo: str) -> None:
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": "x", "action": "approve", "back": "//evil.example/"}
    answer = client(demo).post("/actions/resume", data=data, headers=SAME_ORIGIN, follow_redirects=False)
    assert "evil.example" not in answer.text
    data["back"] = "javascript:alert(1)"
    assert "javascript:" not in client(demo).post("/actions/resume", data=data, headers=SAME_ORIGIN).text


# --- the CLI and the extra -------------------------------------------------------------------


def test_import_runkernel_and_the_other_commands_never_load_the_web_stack(tmp_path: Path) -> None:
    probe = (
        "import sys, runkernel\n"
        "from runkernel.cli.entry import main\n"
        f"main(['runs', '--store', {('sqlite:///' + str(tmp_path / 'x.db'))!r}])\n"
        "main(['spec'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'jinja2', 'uvicorn', 'multipart')"
        " or m.startswith('runkernel.ui')))\n"
    )
    assert main(["start", "--store", f"sqlite:///{tmp_path / 'x.db'}", "--thread", "t", "--app", "a", "hi"]) == 0
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_ui_refuses_a_memory_store_and_a_missing_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--store", "memory:"]) == 2
    assert main(["ui", "--store", f"sqlite:///{tmp_path / 'missing.db'}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("runkernel ui: ") for line in lines)


def test_the_console_serves_a_postgresql_store_and_never_shows_its_password(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{postgres_url}&password=hunter2"  # the test server trusts: the password is never needed
    monkeypatch.setenv("RUNKERNEL_DEMO_LEDGER", str(tmp_path / "ledger.db"))
    assert main(["start", "--store", url, "--thread", "t1", "--run", "run-pg", "--app", "demo", "book me a table"]) == 0
    drive(url)
    browser = client(url)
    pages = {path: browser.get(path) for path in ("/", "/approvals", "/run?id=run-pg")}
    assert all(answer.status_code == 200 for answer in pages.values())
    assert all("hunter2" not in answer.text and "password=***" in answer.text for answer in pages.values())
    (ticket,) = set(form_values(pages["/approvals"].text, "ticket_id"))
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-pg", "ticket_id": ticket, "action": "approve"}
    assert "queued command 1 (approve)" in browser.post("/actions/resume", data=data, headers=SAME_ORIGIN).text
    drive(url)
    assert _state(url, "run-pg") == "ended"


def test_the_console_answers_only_its_own_names() -> None:
    from runkernel.cli.ui import _hosts

    loopback = _hosts("127.0.0.1", 8765)
    assert {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"} <= loopback
    assert "evil.example:8765" not in loopback
    named = _hosts("console.internal", 80)
    assert named == frozenset({"console.internal", "console.internal:80"})
