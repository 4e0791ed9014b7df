"""Shared set-up of the console's tests: a store holding the worker walk-through's Run (docs/how-to/worker.md)
(Awaiting approval of ``pay``), a Run whose committed data is hostile HTML, and an HTTP
client of the console at its access path (``/TOKEN/``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# the console's tests need the ui extra: without it, every module importing this one skips
for _module in ("starlette", "jinja2", "multipart"):
    pytest.importorskip(_module, reason="the ui extra is not installed (pip install -e '.[ui]')")

from starlette.testclient import TestClient  # noqa: E402

from runkernel.cli.entry import main  # noqa: E402
from runkernel.ui.app import create_app  # noqa: E402

TOKEN = "test-token-0123456789"
HOST = "testserver"
SCRIPT = "<script>alert(1)</script>"


def demo_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str = "run-demo") -> str:
    """A SQLite store URL whose Run ``run_id`` of the demo app waits for approval."""
    monkeypatch.setenv("RUNKERNEL_DEMO_LEDGER", str(tmp_path / "ledger.db"))
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    assert main(["start", "--store", url, "--thread", f"t-{run_id}", "--run", run_id, "--app", "demo", "book me a table"]) == 0
    drive(url)
    return url


def drive(url: str, app: str = "examples.demo_app:app") -> None:
    """One worker drive until nothing is runnable (``runkernel worker --once``)."""
    assert main(["worker", "--store", url, "--app", app, "--once"]) == 0


def client(url: str, *, read_only: bool = False, token: str | None = TOKEN) -> TestClient:
    """An HTTP client of the console: its paths ("/approvals") are asked under
    ``/token/``, the console's access path, or at the server's root if ``token`` is None."""
    base = f"http://{HOST}/{token}/" if token is not None else f"http://{HOST}/"
    return TestClient(create_app(url, TOKEN, read_only=read_only, hosts=frozenset({HOST})), base_url=base)


def form_values(html: str, name: str) -> list[str]:
    """The values of every hidden input called ``name`` in a page."""
    return re.findall(rf'name="{name}" value="([^"]*)"', html)


SAME_ORIGIN = {"origin": f"http://{HOST}"}
#: the console's access path, the prefix of every link it prints
BASE = f"/{TOKEN}"
