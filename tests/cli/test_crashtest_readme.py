"""The crash-test examples run as printed: each python block docs/how-to/crashtest.md hands
to this test is a user's pytest file, run by pytest in a fresh interpreter and an empty
directory (the Pydantic AI one only with the extra installed); and the agent of the
Pydantic AI page's first example (docs/pydantic-ai.md) passes the crash test."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from docs_blocks import Block, run_by

ROOT = Path(__file__).resolve().parents[2]




def blocks() -> list[Block]:
    found = run_by("how-to/crashtest.md", "test_crashtest_readme.py")
    assert len(found) == 2
    return found


def test_the_crashtest_examples_run_as_printed(tmp_path: Path) -> None:
    plain, pydantic_ai = blocks()
    assert plain.title is not None and pydantic_ai.title is not None, "each block is a file the reader saves"
    files = {plain.title: plain.code}
    if importlib.util.find_spec("pydantic_ai") is not None:  # the pydantic-ai extra is installed
        files[pydantic_ai.title] = pydantic_ai.code
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
def test_the_durable_pydantic_ai_agent_passes_the_crash_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent of docs/pydantic-ai.md's first example, as printed but for its last line
    (which runs it), crash-tested through its worker app: no store file of its own is made."""
    from runkernel.testing.crashtest import Scenario, crashtest

    (block,) = run_by("pydantic-ai.md", "test_pydantic_ai_readme.py")
    code = block.code
    last = "asyncio.run(main())"
    assert code.rstrip().endswith(last)
    monkeypatch.chdir(tmp_path)
    agent_module = types.ModuleType("readme_agent")
    exec(compile(code.rstrip().removesuffix(last), block.name, "exec"), agent_module.__dict__)
    app = agent_module.durable.worker_app(agent_module.agent, name="inbox")
    report = crashtest(app, Scenario(messages=("Find runkernel and mail me the results.",)), at_most_once=["send_email"])
    print(f"{report.crashes} crashes, recoveries {dict(report.recoveries)}, violations {report.violations}")
    assert report.passed, report.violations
    assert report.crashes == report.boundaries["approve-every-wait"] >= 20
    assert (report.tools["search"].most_extra, report.tools["send_email"].most_extra) == (1, 0)
    assert list(tmp_path.iterdir()) == []  # the worker app's driver is the crash test's


def _readme_section(title: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block under the README's ``## title``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end >= 0 else len(text)]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)


def test_the_readmes_crash_test_section_runs_as_printed(tmp_path: Path) -> None:
    """Its command exits 0 with the report, and its pytest file passes, as a user runs
    both from the clone."""
    [(shell, command), (python, test_file)] = _readme_section("Crash-test your own agent")
    assert (shell, python) == ("bash", "python")
    assert "--at-most-once pay" in command  # the flag that makes a payment declared replay fail
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "RUNKERNEL_DEMO_LEDGER": str(tmp_path / "ledger.db")}
    ran = subprocess.run(["bash", "-c", command.strip()], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    print(ran.stdout[-1500:])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("runkernel crashtest: app demo") and ran.stdout.endswith("verdict: PASS; replay tools that started again: lookup (+1)\n")
    (tmp_path / "test_readme_crashtest.py").write_text(test_file)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_readme_crashtest.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    print(done.stdout[-800:])
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
