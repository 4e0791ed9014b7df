"""The CLI starts at once: ``--version`` and ``--help`` load none of the library's
dependencies, and a command loads only its own module (issue: a CLI that starts at
once). Checked by the module list of a fresh interpreter, never by a time."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runkernel.cli import trace_commands
from runkernel.cli.entry import COMMANDS, build_parser
from runkernel.specs.export import FORMATS

ROOT = Path(__file__).resolve().parent.parent.parent
HEAVY = ("attr", "attrs", "msgspec", "sqlite3", "psycopg", "psycopg_pool", "statemachine", "rfc8785")


def loaded_after(argv: list[str]) -> list[str]:
    """The top-level packages of HEAVY a fresh interpreter holds after ``main(argv)``."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from runkernel.cli.entry import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_load_none_of_the_dependencies(argv: list[str]) -> None:
    assert loaded_after(argv) == []


def test_a_command_loads_only_what_it_uses() -> None:
    assert "sqlite3" not in loaded_after(["schema"])
    assert "sqlite3" not in loaded_after(["spec"])
    assert "psycopg" not in loaded_after(["inspect", "--help"])


def test_the_command_table_says_what_each_module_registers() -> None:
    """``--help`` lists ``COMMANDS``'s one-line helps; each is the module's own."""
    parser = build_parser()
    assert parser._subparsers is not None
    action = parser._subparsers._group_actions[0]
    assert isinstance(action, argparse._SubParsersAction)
    registered = {choice.dest: choice.help for choice in action._choices_actions}
    assert registered == {name: help_text for name, help_text, _ in COMMANDS}
    assert list(registered) == [name for name, _, _ in COMMANDS]


def test_every_command_parses_with_only_its_module_built() -> None:
    for name, _, _ in COMMANDS:
        parser = build_parser(name)
        assert parser._subparsers is not None
        choices = parser._subparsers._group_actions[0].choices
        assert isinstance(choices, dict)
        assert "-h" in choices[name].format_help(), f"{name} is a placeholder in its own parser"


def test_the_spec_formats_are_the_exporters() -> None:
    assert trace_commands.FORMATS == FORMATS


def test_the_main_job_needs_no_test_dependency() -> None:
    """The quick start's first line installs no extras: ``runkernel simulate`` must run
    where pytest and hypothesis are not installed (here: made unimportable)."""
    probe = (
        "import sys\n"
        "sys.modules['pytest'] = None\n"
        "sys.modules['hypothesis'] = None\n"
        "from runkernel.cli.entry import main\n"
        "sys.exit(main(['simulate', '--runs', '3', '--no-progress']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "verdict: PASS" in done.stdout
