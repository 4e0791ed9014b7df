"""The console in a real headless browser: ``runkernel ui`` serves a store holding the
worker walk-through's Run (docs/how-to/worker.md) (Awaiting approval of ``pay``); Chromium (the system's package,
driven by Playwright) opens the printed URL, goes to Approvals, clicks Approve, and after
a worker drive sees the wait gone without a reload and the Run Ended.

Every wait is on a condition with a hang guard of 120 s or more, never a sleep. With
``RUNKERNEL_SCREENSHOTS=DIR`` the three pages are written to DIR for the docs.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docs_blocks import run_by
from ui_support import demo_store, drive

ROOT = Path(__file__).resolve().parent.parent.parent
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
        assert re.fullmatch(r"open http://127\.0\.0\.1:\d+/[\w-]{43}/\n", printed), printed
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
            page.goto(address)  # every page under its access path; no cookie
            assert page.url == address and page.context.cookies() == []
            expect(page.locator("#runs")).to_contain_text("run-demo")
            expect(page.locator("#count-awaiting")).to_have_text("awaiting: 1")
            _screenshot(page, "runs")

            page.click("#nav-approvals")
            wait = page.locator("section.wait").filter(has_text="run-demo")
            expect(wait.locator(".tool")).to_have_text("pay")
            expect(wait.locator(".arguments")).to_contain_text('"amount": 20')
            _screenshot(page, "approvals")

            wait.locator("button.approve").click()
            expect(page.locator("#notice")).to_have_text("queued command 1 (approve); a worker applies it")

            drive(url)  # a worker applies the approval, pays, and the model ends the Run
            # live updates: the page polls and replaces its content, no reload
            expect(page.locator("#no-waits")).to_be_visible()

            page.goto(address + "run?id=run-demo")
            expect(page.locator("#run-state")).to_contain_text("ended")
            expect(page.locator("#messages")).to_contain_text("Your table at Baan is booked for two.")
            expect(page.locator(".machine-state.current").first).to_contain_text("Ended")
            _screenshot(page, "run")
        finally:
            browser.close()
    print(f"browser test: approved and saw the Run end in {time.monotonic() - started:.1f} s")


def _walkthrough_block(test: str) -> list[str]:
    """The block of docs/how-to/worker.md that the page hands to ``tests/TEST``."""
    (found,) = run_by("how-to/worker.md", test)
    return [line for line in found.code.splitlines() if line.strip()]


def test_the_console_approves_the_walkthrough_run_with_a_click(tmp_path: Path) -> None:
    """The how-to as printed (docs/how-to/worker.md): the walk-through's start and first worker, then its console
    command; a click on Approve, the walk-through's second worker, and the Run is Ended."""
    walkthrough = _walkthrough_block("test_walkthrough.py")
    (console_line,) = _walkthrough_block("test_ui_browser.py")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("RUNKERNEL_DEMO_LEDGER", None)

    def shell(command: str) -> str:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{command!r} exited {done.returncode}: {done.stderr}"
        return done.stdout

    shell(walkthrough[0])  # start
    shell(walkthrough[1])  # worker --once: the Run waits for approval of `pay`
    server = subprocess.Popen(["bash", "-c", f"exec {console_line}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    output = server.stdout
    assert output is not None

    def read() -> None:
        for line in output:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        try:
            printed = lines.get(timeout=GUARD_MS / 1000)
        except queue.Empty:
            pytest.fail(f"{console_line!r} printed no URL within 120 s")
        address = printed.split("open ", 1)[1].strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:8765/[\w-]{43}/", address), printed
        with playwright_api.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(GUARD_MS)
                page.goto(address)
                playwright_api.expect(page.locator("#runs")).to_contain_text("run-demo")
                page.click("#nav-approvals")
                page.locator("section.wait").filter(has_text="run-demo").locator("button.approve").click()
                playwright_api.expect(page.locator("#notice")).to_contain_text("queued command 1 (approve)")
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=GUARD_MS / 1000)
    shell(walkthrough[4])  # the second worker applies the approval
    assert re.search(r"^run-demo\s+t1\s+ended\s", shell(walkthrough[5]), re.M)
