"""The console in a real headless browser: ``runkernel ui`` serves a store holding the
README walk-through's Run (Awaiting approval of ``pay``); Chromium (the system's package,
driven by Playwright) opens the printed URL, goes to Approvals, clicks Approve, and after
a worker drive sees the wait gone without a reload and the Run Ended.

Every wait is on a condition with a hang guard of 120 s or more, never a sleep. With
``RUNKERNEL_SCREENSHOTS=DIR`` the three pages are written to DIR for the docs.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ui_support import demo_store, drive

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
#: what root and an offline machine need: no sandbox (root), no GPU, nothing fetched
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
GUARD_MS = 120_000

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs the chromium package", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)

playwright_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(store URL, the URL ``runkernel ui`` printed), the console running meanwhile."""
    url = demo_store(tmp_path, monkeypatch)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "ui", "--store", url, "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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
            printed = lines.get(timeout=GUARD_MS / 1000)  # the socket listens before this line
        except queue.Empty:
            pytest.fail("runkernel ui printed no URL within 120 s")
        assert printed.startswith("open http://127.0.0.1:") and "?token=" in printed, printed
        yield url, printed.split("open ", 1)[1].strip()
    finally:
        server.terminate()
        try:
            server.wait(timeout=GUARD_MS / 1000)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        assert server.stderr is not None
        errors = server.stderr.read()
        print(f"runkernel ui stderr: {errors.strip()!r}")


def _screenshot(page: object, name: str) -> None:
    directory = os.environ.get("RUNKERNEL_SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(directory) / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def test_approve_in_a_real_browser_and_see_the_run_end_after_a_worker_drive(console: tuple[str, str]) -> None:
    url, address = console
    expect = playwright_api.expect
    started = time.monotonic()
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.set_default_timeout(GUARD_MS)
            page.goto(address)  # the token once; a cookie from then on
            assert "token=" not in page.url
            expect(page.locator("#runs")).to_contain_text("run-demo")
            expect(page.locator("#count-awaiting")).to_have_text("awaiting: 1")
            _screenshot(page, "runs")

            page.click("#nav-approvals")
            wait = page.locator("section.wait").filter(has_text="run-demo")
            expect(wait.locator(".tool")).to_have_text("pay")
            expect(wait.locator(".arguments")).to_contain_text('"amount": 20')
            _screenshot(page, "approvals")

            wait.locator("button.approve").click()
            expect(page.locator("#notice")).to_contain_text("queued command 1 (approve) for run run-demo")

            drive(url)  # a worker applies the approval, pays, and the model ends the Run
            # live updates: the page polls and replaces its content, no reload
            expect(page.locator("#no-waits")).to_be_visible()

            page.goto(address.split("?")[0] + "run?id=run-demo")
            expect(page.locator("#run-state")).to_contain_text("ended")
            expect(page.locator("#messages")).to_contain_text("Your table at Baan is booked for two.")
            expect(page.locator(".machine-state.current").first).to_contain_text("Ended")
            _screenshot(page, "run")
        finally:
            browser.close()
    print(f"browser test: approved and saw the Run end in {time.monotonic() - started:.1f} s")
