"""Every code block of the documentation site runs as printed (see ``docs_blocks``), and
the generated reference pages are what their generators print today."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

import postgres_support
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


#: The store URL the PostgreSQL how-to prints: a schema of the database ``test`` on this
#: machine's server. The test runs the page on the database ``RUNKERNEL_TEST_POSTGRES_DSN``
#: names instead, never on a database the DSN does not name.
HOWTO_STORE = "postgresql://postgres@127.0.0.1:5432/test?schema=howto_workers"


@contextlib.contextmanager
def _howto_store_on_the_dsn() -> Iterator[dict[str, str]]:
    """The PostgreSQL how-to's store, moved onto the DSN's database in a schema of its
    own (so its fixed run ids start afresh and parallel runs never meet), dropped after:
    the one text of the page the test replaces."""
    url = postgres_support.fresh_url("howto")
    try:
        yield {HOWTO_STORE: url}
    finally:
        import psycopg
        import psycopg.sql

        _, schema = split_url(url)
        with psycopg.connect(postgres_support.dsn(), autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(schema)))


def split_url(url: str) -> tuple[str, str]:
    """A store URL's libpq part and its ``schema`` parameter."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    schema = dict(query)["schema"]
    rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "schema"])
    return urllib.parse.urlunsplit(parts._replace(query=rest)), schema


#: What a page needs done before its blocks run: the texts to replace in its blocks.
SETUP: dict[str, Callable[[], contextlib.AbstractContextManager[dict[str, str]]]] = {
    "how-to/postgres.md": _howto_store_on_the_dsn,
}


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
    cwd = tmp_path / "page"
    cwd.mkdir()
    with setup() if setup is not None else contextlib.nullcontext({}) as replacements:
        for block in blocks(page):
            if block.language in RUN_LANGUAGES and block.run_by is None:
                print(run_block(_replaced(block, replacements), cwd, env, tmp_path / "shell-state.sh"))


def _replaced(block: Block, replacements: dict[str, str]) -> Block:
    code = block.code
    for printed, used in replacements.items():
        code = code.replace(printed, used)
    return attrs.evolve(block, code=code)


def test_the_postgres_page_runs_on_the_database_its_dsn_names() -> None:
    """The how-to prints a store on the database ``test``; the page's setup replaces that
    URL in its blocks with a schema of its own on the DSN's database, so the page writes
    to no other database (and the URL it replaces is the one the page prints)."""
    page = "how-to/postgres.md"
    run = [block for block in blocks(ROOT / "docs" / page) if block.language in RUN_LANGUAGES and block.run_by is None]
    assert any(HOWTO_STORE in block.code for block in run), "the page no longer prints the store URL the test replaces"
    with SETUP[page]() as replacements:
        replaced = [_replaced(block, replacements) for block in run]
        (url,) = set(replacements.values())
    assert not any(HOWTO_STORE in block.code for block in replaced)
    assert any(url in block.code for block in replaced)
    base, schema = split_url(url)
    assert base == postgres_support.dsn() and schema != "howto_workers"


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
