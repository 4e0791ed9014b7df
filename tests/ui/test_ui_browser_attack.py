"""The console against a browser-borne attacker (issue 36): a page served from another
port of 127.0.0.1, opened by the same browser after the console, logs every credential
the browser hands it (cookies, Referer, the address it was asked for, every header), and
none of them opens anything on the console: each is replayed, as curl would, against the
console's read pages and action routes with a forged Origin, and every one is refused.
And two consoles side by side both keep working in one browser.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import queue
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from ui_support import demo_store

from test_ui_browser import CHROMIUM, CHROMIUM_FLAGS, GUARD_MS, playwright_api

import httpx

from runkernel.adapters.stores.registry import open_store
from runkernel.ui.security import csrf_value

ROOT = Path(__file__).resolve().parent.parent.parent


@contextlib.contextmanager
def serving(url: str) -> Iterator[str]:
    """``runkernel ui --port 0`` over ``url``, running meanwhile: the URL it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "ui", "--store", url, "--port", "0"],
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
        try:
            printed = lines.get(timeout=GUARD_MS / 1000)
        except queue.Empty:
            pytest.fail("runkernel ui printed no URL within 120 s")
        yield printed.split("open ", 1)[1].strip()
    finally:
        server.terminate()
        try:
            server.wait(timeout=GUARD_MS / 1000)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class Logged(http.server.BaseHTTPRequestHandler):
    """Another local web server: it answers a page and logs every request it gets."""

    seen: list[tuple[str, list[tuple[str, str]]]] = []

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        Logged.seen.append((self.path, list(self.headers.items())))
        body = b"<!doctype html><title>another local server</title><p>hello</p>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def other_server() -> Iterator[str]:
    """The address of another web server on 127.0.0.1 (another port), logging."""
    Logged.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Logged)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _candidates(seen: list[tuple[str, list[tuple[str, str]]]]) -> set[str]:
    """Every value the other server received that could be a credential: whole header
    values, each cookie's value, every piece of a URL (path segments, query values)."""
    found: set[str] = set()
    for path, headers in seen:
        values = [path] + [value for _, value in headers]
        for value in values:
            found.add(value)
            found.update(piece for piece in re.split(r"[;,\s/?&=]+", value) if len(piece) >= 8)
    return found


def _refused_everywhere(console: str, value: str) -> list[str]:
    """Where ``value`` opened something on the console (empty: refused everywhere)."""
    origin = console.split("/", 3)
    root = f"{origin[0]}//{origin[2]}"
    forged = {"origin": root}
    csrf = csrf_value(value)
    opened = []
    attempts = [
        ("cookie", {"cookie": value}, ""),
        ("named cookie", {"cookie": f"runkernel_ui_token={value}"}, ""),
        ("bearer", {"authorization": f"Bearer {value}"}, ""),
        ("query", {}, f"?token={urllib.parse.quote(value)}"),
    ]
    with httpx.Client(timeout=60, follow_redirects=False) as curl:
        if value.startswith("http"):  # an address (a Referer): its path and query, asked of the console
            parts = urllib.parse.urlsplit(value)
            answer = curl.get(root + parts.path + (f"?{parts.query}" if parts.query else ""), headers=forged)
            if answer.status_code < 400:
                opened.append(f"GET {parts.path} -> {answer.status_code}")
        for how, headers, query in attempts:
            for path in ("/", "/approvals", "/run?id=run-demo", "/trace?run=run-demo"):
                sep = "&" if "?" in path and query else ""
                target = root + path + (sep + query[1:] if sep else query)
                answer = curl.get(target, headers={**headers, **forged})
                if answer.status_code < 400:
                    opened.append(f"{how} GET {path} -> {answer.status_code}")
            for action, fields in (("approve", {}), ("deny", {"reason": "x"}), ("input", {"input": "x"})):
                data = {"csrf": csrf, "run_id": "run-demo", "ticket_id": "tk", "action": action, **fields}
                answer = curl.post(root + "/actions/resume" + query, data=data, headers={**headers, **forged})
                if answer.status_code < 400 or answer.status_code == 409:  # 409: it got to the store
                    opened.append(f"{how} POST resume {action} -> {answer.status_code}")
            data = {"csrf": csrf, "operation_id": "op", "outcome": "applied"}
            answer = curl.post(root + "/actions/reconcile" + query, data=data, headers={**headers, **forged})
            if answer.status_code < 400 or answer.status_code == 409:
                opened.append(f"{how} POST reconcile -> {answer.status_code}")
    return opened


def test_a_page_on_another_port_gets_no_credential_the_console_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_server: str
) -> None:
    url = demo_store(tmp_path, monkeypatch)
    with serving(url) as console, playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context()
            page = context.new_page()
            page.set_default_timeout(GUARD_MS)
            page.goto(console)
            page.click("#nav-approvals")
            playwright_api.expect(page.locator("section.wait")).to_contain_text("pay")
            # the same browser opens the other server: in a new tab, by a link from the
            # console's own page (its Referer policy applies), and under "localhost"
            other = context.new_page()
            other.goto(other_server + "/typed")
            page.evaluate(f"window.location.href = {other_server + '/from-console'!r}")
            page.wait_for_url(other_server + "/from-console")
            other.goto(other_server.replace("127.0.0.1", "localhost") + "/by-name")
        finally:
            browser.close()
        seen = list(Logged.seen)
        assert {path for path, _ in seen} >= {"/typed", "/from-console", "/by-name"}, seen
        opened = {value: where for value in _candidates(seen) if (where := _refused_everywhere(console, value))}
        assert opened == {}, f"the other server got credentials the console accepts: {opened}"
    store = open_store(url, create=False, read_only=True)
    try:
        assert store.pending_commands("run-demo") == []
    finally:
        store.close()


def test_two_consoles_side_by_side_both_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first_url = demo_store(tmp_path / "first", monkeypatch, run_id="run-first")
    second_url = demo_store(tmp_path / "second", monkeypatch, run_id="run-second")
    with serving(first_url) as first, serving(second_url) as second, playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context()
            one = context.new_page()
            one.set_default_timeout(GUARD_MS)
            one.goto(first)
            playwright_api.expect(one.locator("#runs")).to_contain_text("run-first")
            two = context.new_page()
            two.set_default_timeout(GUARD_MS)
            two.goto(second)  # opening the second console must not log the first one out
            playwright_api.expect(two.locator("#runs")).to_contain_text("run-second")
            for page, run_id in ((one, "run-first"), (two, "run-second")):
                page.bring_to_front()
                page.click("#nav-approvals")
                wait = page.locator("section.wait").filter(has_text=run_id)
                wait.locator("button.approve").click()
                playwright_api.expect(page.locator("#notice")).to_contain_text("queued command 1 (approve)")
        finally:
            browser.close()
    for url, run_id in ((first_url, "run-first"), (second_url, "run-second")):
        store = open_store(url, create=False, read_only=True)
        try:
            assert len(store.pending_commands(run_id)) == 1
        finally:
            store.close()
