"""Every code block of the documentation site runs as printed (see ``docs_blocks``), and
the generated reference pages are what their generators print today."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs_blocks import RUN_LANGUAGES, SHOWN_LANGUAGES, Block, blocks, commands, pages

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent

#: A page whose blocks need an extra: the module to import, and the skip reason.
NEEDS: dict[str, tuple[str, str]] = {
    "how-to/postgres.md": ("psycopg_pool", "the postgres extra is not installed (pip install -e '.[postgres]')"),
    # its block sends to an OTLP collector: tests/integrations/test_otel_docs.py runs it as printed
    # with the SDK's in-memory exporter in the OTLP exporter's place
    "how-to/opentelemetry.md": (
        "opentelemetry.exporter.otlp.proto.http",
        "the OTLP exporter is not installed (tests/integrations/test_otel_docs.py runs this page's block with an in-memory one)",
    ),
    "pydantic-ai.md": ("pydantic_ai", "the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')"),
}


def _fresh_howto_schema() -> None:
    """The PostgreSQL how-to's store is a schema of the machine's test server (the page
    names 127.0.0.1:5432/test, where this project's tests run): emptied before the page
    runs, so its fixed run ids start afresh."""
    dsn = os.environ.get("RUNKERNEL_TEST_POSTGRES_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL server: set RUNKERNEL_TEST_POSTGRES_DSN=postgresql://user@host:port/db to run these tests")
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS howto_workers CASCADE")


#: What a page needs done before its blocks run.
SETUP = {"how-to/postgres.md": _fresh_howto_schema}


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # the docs call `runkernel` and `python3` as a reader would: this interpreter's
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), ".", env.get("PYTHONPATH", "")) if p)
    return env


def _inspect_json(cwd: Path, env: dict[str, str], line: str) -> dict[str, object]:
    run_id = re.search(r"(?:resume|reconcile)\s+(\S+)", line)
    runs = subprocess.run(
        ["runkernel", "runs", "--format", "json"], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    listed = json.loads(runs.stdout)
    wanted = run_id.group(1) if run_id and not run_id.group(1).startswith("OPERATION") else listed[0]["run_id"]
    shown = subprocess.run(
        ["runkernel", "inspect", str(wanted), "--format", "json"], cwd=cwd, env=env, capture_output=True, text=True,
        check=True,
    )
    view: dict[str, object] = json.loads(shown.stdout)
    return view


def substitute(line: str, cwd: Path, env: dict[str, str]) -> str:
    """A command with its placeholders replaced by what a reader copies from the output
    of ``runkernel inspect`` (the open ticket; the first Indeterminate call's operation)."""
    if "TICKET" in line:
        ticket = _inspect_json(cwd, env, line)["ticket"]
        assert isinstance(ticket, dict), "the page asks for a ticket, but no wait is open"
        line = line.replace("TICKET", str(ticket["ticket_id"]))
    if "OPERATION" in line:
        listed = json.loads(
            subprocess.run(["runkernel", "runs", "--format", "json"], cwd=cwd, env=env, capture_output=True,
                           text=True, check=True).stdout
        )
        for run in listed:
            view = _inspect_json(cwd, env, f"resume {run['run_id']}")
            found = view.get("indeterminate")
            if isinstance(found, list) and found:
                line = line.replace("OPERATION", str(found[0]["operation_id"]))
                break
        else:
            raise AssertionError("the page asks for an operation id, but no call is Indeterminate")
    return line


def run_block(block: Block, cwd: Path, env: dict[str, str], shell_state: Path) -> str:
    """Run one block as the page says; returns what it printed. A bash block runs as one
    script that stops at the first failing line, with the variables the page's earlier
    blocks exported (``shell_state``), as in the reader's own shell."""
    if block.language == "python" and block.title:
        (cwd / block.title).write_text(block.code, encoding="utf-8")
        return ""
    if block.language == "python":
        done = subprocess.run([sys.executable, "-c", block.code], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{block.name} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout
    lines = [substitute(line, cwd, env) for line in commands(block)]
    script = "\n".join(
        ["set -e", f'if [ -f "{shell_state}" ]; then . "{shell_state}"; fi', *(f"echo '$ '{_quoted(line)}\n{line}" for line in lines),
         f'export -p > "{shell_state}"']
    )
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{block.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


PAGES = [page for page in pages() if any(b.language in RUN_LANGUAGES and b.run_by is None for b in blocks(page))]


@pytest.mark.skipif(shutil.which("runkernel", path=str(BIN)) is None, reason="the runkernel command is not installed (pip install -e .)")
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT / "docs")) for p in PAGES])
def test_every_block_of_a_page_runs_as_printed(page: Path, tmp_path: Path) -> None:
    name = str(page.relative_to(ROOT / "docs"))
    if name in NEEDS:
        module, reason = NEEDS[name]
        pytest.importorskip(module, reason=reason)
    env = _environment()
    setup = SETUP.get(name)
    if setup is not None:
        setup()
    cwd = tmp_path / "page"
    cwd.mkdir()
    for block in blocks(page):
        if block.language in RUN_LANGUAGES and block.run_by is None:
            print(run_block(block, cwd, env, tmp_path / "shell-state.sh"))


def test_a_block_another_test_runs_is_run_by_that_test() -> None:
    """A block this module leaves to another test: that test exists and reads the page."""
    handed = [(page, block) for page in pages() for block in blocks(page) if block.run_by is not None]
    assert handed, "no page hands a block to another test"
    for page, block in handed:
        assert block.run_by is not None and block.language in RUN_LANGUAGES, block.name
        test = ROOT / block.run_by
        assert test.is_file(), f"{block.name}: {block.run_by} does not exist"
        assert str(page.relative_to(ROOT / "docs")) in test.read_text(encoding="utf-8"), (
            f"{block.name}: {block.run_by} does not read docs/{page.relative_to(ROOT / 'docs')}"
        )


def test_every_block_is_run_or_shown() -> None:
    """A block in a language the test does not know would be skipped silently."""
    for page in pages():
        for block in blocks(page):
            assert block.language in RUN_LANGUAGES + SHOWN_LANGUAGES, f"{block.name}: ```{block.language}"


def test_the_generated_reference_pages_are_current() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import reference_docs

    for name, make in reference_docs.PAGES.items():
        page = ROOT / "docs" / "reference" / name
        assert page.read_text(encoding="utf-8") == make(), f"docs/reference/{name} is stale: python tools/reference_docs.py"


def test_every_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in pages():
        assert str(page.relative_to(ROOT / "docs")) in nav, f"{page} is not in mkdocs.yml's nav"
