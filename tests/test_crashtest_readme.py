"""The README's crash-test examples run as printed: each python block of "Crash-testing
your own app" is a user's pytest file, run by pytest in a fresh interpreter and an empty
directory (the Pydantic AI one only with the extra installed); and the agent of "Durable
Pydantic AI agents" passes the crash test."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent


def blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## Crash-testing your own app\n\n(.*?)(?=^## )", text, re.S | re.M)
    assert section is not None, "the README has a section 'Crash-testing your own app'"
    found = re.findall(r"^```python\n(.*?)^```$", section.group(1), re.S | re.M)
    assert len(found) == 2
    return [str(block) for block in found]


def test_the_readme_crashtest_examples_run_as_printed(tmp_path: Path) -> None:
    plain, pydantic_ai = blocks()
    files = {"test_shop.py": plain}
    if importlib.util.find_spec("pydantic_ai") is not None:  # the pydantic-ai extra is installed
        files["test_pydantic_ai_shop.py"] = pydantic_ai
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    done = subprocess.run(  # one interpreter for both: a user's pytest run
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    print(done.stdout[-2000:])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(files) + 1} passed" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("pydantic_ai") is None, reason="the pydantic-ai extra is not installed")
def test_the_readme_durable_pydantic_ai_agent_passes_the_crash_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent of "Durable Pydantic AI agents", as printed but for its last line (which
    runs it), crash-tested through its worker app: no store file of its own is made."""
    from runkernel.testing.crashtest import Scenario, crashtest

    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## Durable Pydantic AI agents\n\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section is not None
    (code,) = re.findall(r"^```python\n(.*?)^```$", section.group(1), re.S | re.M)
    last = "asyncio.run(main())"
    assert code.rstrip().endswith(last)
    monkeypatch.chdir(tmp_path)
    agent_module = types.ModuleType("readme_agent")
    exec(compile(code.rstrip().removesuffix(last), "README.md", "exec"), agent_module.__dict__)
    app = agent_module.durable.worker_app(agent_module.agent, name="inbox")
    report = crashtest(app, Scenario(messages=("Find runkernel and mail me the results.",)), at_most_once=["send_email"])
    print(f"{report.crashes} crashes, recoveries {dict(report.recoveries)}, violations {report.violations}")
    assert report.passed, report.violations
    assert report.crashes == report.boundaries["approve-every-wait"] >= 20
    assert (report.tools["search"].most_extra, report.tools["send_email"].most_extra) == (1, 0)
    assert list(tmp_path.iterdir()) == []  # the worker app's driver is the crash test's
