"""The console's edges an operator touches (issue 36): a credential another local server
never receives, every route refusing what such a server could replay, notices from a
fixed list, a non-loopback bind only with ``--allow-remote``, and SIGTERM as a clean stop.

The browser-driven attack (a page on another loopback port) is in
tests/ui/test_ui_browser_attack.py.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

# first: without the ui extra it skips this module, before anything imports starlette
from ui_support import HOST, SAME_ORIGIN, TOKEN, client, demo_store, form_values

from starlette.testclient import TestClient

from runkernel.adapters.stores.registry import open_store
from runkernel.cli.entry import main
from runkernel.ui.app import create_app
from runkernel.ui.security import csrf_value

ROOT = Path(__file__).resolve().parent.parent.parent
#: the cookie name the console once set: a browser sends 127.0.0.1's cookies to every port
OLD_COOKIE = "runkernel_ui_token"


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return demo_store(tmp_path, monkeypatch)


def _pending(url: str, run_id: str) -> int:
    store = open_store(url, create=False, read_only=True)
    try:
        return len(store.pending_commands(run_id))
    finally:
        store.close()


def _ticket(url: str) -> str:
    (ticket,) = set(form_values(client(url).get("/approvals").text, "ticket_id"))
    return ticket


#: what another local server could have logged and replays with curl: the token as a
#: cookie (sent to every port of 127.0.0.1), as a bearer header, as a query parameter
REPLAYS: dict[str, dict[str, Any]] = {
    "cookie": {"cookies": {OLD_COOKIE: TOKEN}},
    "bearer": {"headers": {"authorization": f"Bearer {TOKEN}"}},
    "query": {"params": {"token": TOKEN}},
}

READS = ["/", "/run?id=run-demo", "/trace?run=run-demo", "/approvals", "/static/live.js"]


def _outside(url: str, replay: str) -> TestClient:
    """A client at the console's address without its path: what curl holds with a leaked value."""
    browser = TestClient(create_app(url, TOKEN, hosts=frozenset({HOST})), base_url=f"http://{HOST}")
    for name, value in REPLAYS[replay].get("cookies", {}).items():
        browser.cookies.set(name, value)
    return browser


@pytest.mark.parametrize("replay", sorted(REPLAYS))
@pytest.mark.parametrize("path", READS)
def test_every_read_route_refuses_a_request_without_the_credential(demo: str, replay: str, path: str) -> None:
    extra = REPLAYS[replay]
    answer = _outside(demo, replay).get(
        path, headers={**SAME_ORIGIN, **extra.get("headers", {})}, params=extra.get("params"), follow_redirects=True
    )
    assert answer.status_code == 403, (path, replay, answer.status_code)
    assert "run-demo" not in answer.text and "pay" not in answer.text


ACTIONS = {
    "approve": ("/actions/resume", {"action": "approve"}),
    "deny": ("/actions/resume", {"action": "deny", "reason": "no"}),
    "input": ("/actions/resume", {"action": "input", "input": "yes"}),
    "reconcile": ("/actions/reconcile", {"operation_id": "op", "outcome": "applied"}),
}


@pytest.mark.parametrize("replay", sorted(REPLAYS))
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_every_action_route_refuses_a_request_without_the_credential_even_with_csrf_and_origin(
    demo: str, replay: str, action: str
) -> None:
    path, fields = ACTIONS[action]
    extra = REPLAYS[replay]
    data = {"csrf": csrf_value(TOKEN), "run_id": "run-demo", "ticket_id": _ticket(demo), **fields}
    answer = _outside(demo, replay).post(
        path, data=data, headers={**SAME_ORIGIN, **extra.get("headers", {})}, params=extra.get("params")
    )
    assert answer.status_code == 403, (action, replay, answer.status_code)
    assert _pending(demo, "run-demo") == 0


def test_the_console_sets_no_cookie(demo: str) -> None:
    """Nothing for a browser to send to another port: every answer is cookie-free."""
    browser = client(demo)
    for path in ("/", "/approvals", "/run?id=run-demo"):
        assert "set-cookie" not in browser.get(path).headers
    assert not browser.cookies


# --- notices ------------------------------------------------------------------------------


def test_a_notice_of_arbitrary_text_never_reaches_the_banner(demo: str) -> None:
    browser = client(demo)
    for path in ("/approvals", "/run?id=run-demo"):
        page = browser.get(path, params={"notice": "Approved by security: approve every payment"}).text
        assert "approve every payment" not in page and 'id="notice"' not in page
        forged = browser.get(path, params={"notice": "queued", "command": "1 (all payments approved)", "action": "approve"}).text
        assert "all payments" not in forged and 'id="notice"' not in forged
        odd = browser.get(path, params={"notice": "queued", "command": "3", "action": "wire money"}).text
        assert "wire money" not in odd and 'id="notice"' not in odd


def test_a_known_notice_shows_its_fixed_text(demo: str) -> None:
    page = client(demo).get("/approvals", params={"notice": "queued", "command": "7", "action": "deny"}).text
    assert 'id="notice">queued command 7 (deny); a worker applies it<' in page
    page = client(demo).get("/approvals", params={"notice": "recorded", "outcome": "not_applied"}).text
    assert 'id="notice">recorded not_applied for the Indeterminate call<' in page


# --- binding another interface ---------------------------------------------------------------


@pytest.fixture
def no_serving(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """uvicorn's serving replaced by a record of the app it was given."""
    uvicorn = pytest.importorskip("uvicorn")
    served: list[Any] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: served.append(self.config.app))
    return served


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "console.internal"])
def test_a_non_loopback_host_is_refused_without_allow_remote(
    demo: str, host: str, no_serving: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["ui", "--store", demo, "--host", host, "--port", "0"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("runkernel ui: ") and "--allow-remote" in line
    assert no_serving == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_host_needs_no_flag(demo: str, host: str, no_serving: list[Any]) -> None:
    assert main(["ui", "--store", demo, "--host", host, "--port", "0"]) == 0
    assert len(no_serving) == 1


def test_allow_remote_keeps_the_host_check_on_with_the_names_given(demo: str, no_serving: list[Any]) -> None:
    from runkernel.cli.ui import _hosts

    assert main(["ui", "--store", demo, "--host", "0.0.0.0", "--port", "0", "--allow-remote"]) == 0
    (app,) = no_serving
    refused = TestClient(app, base_url="http://evil.example:8765").get(f"/{TOKEN}/")
    assert refused.status_code in (400, 403)
    every = _hosts("0.0.0.0", 8765)
    assert every is not None and "evil.example:8765" not in every and "127.0.0.1:8765" in every
    assert _hosts("console.internal", 80) == frozenset({"console.internal", "console.internal:80"})


# --- SIGTERM ----------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["while serving", "as soon as the url is printed"])
def test_sigterm_stops_the_console_cleanly_with_exit_0(demo: str, when: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "ui", "--store", demo, "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert server.stdout is not None
    output = server.stdout
    def read() -> None:
        for line in output:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        printed = lines.get(timeout=120)
        assert printed.startswith("open http://127.0.0.1:"), printed
        if when == "while serving":
            assert httpx.get(printed.split("open ", 1)[1].strip(), timeout=120).status_code == 200
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.stderr is not None
    errors = server.stderr.read()
    assert "Traceback" not in errors, errors
