"""The example traces under ``tests/data/traces`` judged by ``runkernel check-trace``.

Every commit-log rule has a legal trace that exercises its situation and an illegal
trace that is legal up to one line breaking exactly that rule; ``manifest.json`` says
which line and rule the checker must report. The files are data: regenerate them with
``python tests/data/traces/make_examples.py`` but never read them through the script.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runkernel.cli.entry import main
from runkernel.kernel.rules import Rule

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
LEGAL = sorted((DATA / "legal").glob("*.jsonl"))
ILLEGAL = sorted((DATA / "illegal").glob("*.jsonl"))
MANIFEST: dict[str, dict[str, Any]] = json.loads((DATA / "manifest.json").read_text("utf-8"))

_ALL_RULES = list(Rule)
#: The rules a commit log can break: IDENTITY .. GROUP_GATE. The rest are about
#: inputs to ``decide`` and never appear in a trace verdict.
COMMIT_LOG_RULES = _ALL_RULES[: _ALL_RULES.index(Rule.RUN_NOT_AWAITING)]

LEGAL_REPORT = re.compile(r"^(?P<name>.+): legal: (?P<commits>\d+) commits in (?P<threads>\d+) threads$")


def _check(capsys: pytest.CaptureFixture[str], *paths: Path | str) -> tuple[int, str, str]:
    code = main(["check-trace", *(str(p) for p in paths)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_the_data_is_there() -> None:
    assert len(LEGAL) >= len(COMMIT_LOG_RULES) + 6
    assert len(ILLEGAL) >= len(COMMIT_LOG_RULES)


@pytest.mark.parametrize("path", LEGAL, ids=[p.name for p in LEGAL])
def test_legal_example_is_accepted(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _check(capsys, path)
    assert (code, err) == (0, "")
    match = LEGAL_REPORT.match(out.rstrip("\n"))
    assert match is not None, out
    assert out.count("\n") == 1
    assert match["name"] == str(path)
    # Every line was judged, and the thread count matches the file.
    lines = [json.loads(raw) for raw in _lines(path)]
    assert int(match["commits"]) == len(lines)
    assert int(match["threads"]) == len({line["thread_id"] for line in lines})


@pytest.mark.parametrize("path", ILLEGAL, ids=[p.name for p in ILLEGAL])
def test_illegal_example_is_reported_at_its_line_and_rule(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = MANIFEST[path.name]
    code, out, err = _check(capsys, path)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    prefix = f"{path}:{expected['line']}: {expected['rule']}: "
    assert err.startswith(prefix), f"expected {prefix!r}, got {err!r}"
    assert err[len(prefix):].strip(), "the report carries a message"


@pytest.mark.parametrize("path", ILLEGAL, ids=[p.name for p in ILLEGAL])
def test_illegal_example_is_legal_before_its_bad_line(path: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad_line = MANIFEST[path.name]["line"]
    prefix = _lines(path)[: bad_line - 1]
    if not prefix:
        pytest.skip("the very first line is the illegal one")
    trimmed = tmp_path / path.name
    trimmed.write_bytes(b"".join(prefix))
    code, _out, err = _check(capsys, trimmed)
    assert (code, err) == (0, "")


def test_manifest_describes_exactly_the_illegal_files() -> None:
    assert set(MANIFEST) == {p.name for p in ILLEGAL}
    commit_log_values = {rule.value for rule in COMMIT_LOG_RULES}
    for name, entry in MANIFEST.items():
        assert set(entry) == {"line", "rule", "why"}, name
        assert isinstance(entry["line"], int) and entry["line"] >= 1, name
        assert 1 <= entry["line"] <= len(_lines(DATA / "illegal" / name)), name
        assert entry["rule"] in commit_log_values, name
        assert isinstance(entry["why"], str) and entry["why"].strip(), name
        # <rule>.jsonl or <rule>--<variant>.jsonl: the name says the rule.
        assert name.split("--")[0].removesuffix(".jsonl") == entry["rule"], name


@pytest.mark.parametrize("rule", COMMIT_LOG_RULES, ids=[r.value for r in COMMIT_LOG_RULES])
def test_every_commit_log_rule_has_a_legal_and_an_illegal_example(rule: Rule) -> None:
    assert (DATA / "legal" / f"{rule.value}.jsonl").is_file()
    assert (DATA / "illegal" / f"{rule.value}.jsonl").is_file()
    assert MANIFEST[f"{rule.value}.jsonl"]["rule"] == rule.value


def test_commit_log_rules_are_the_first_group() -> None:
    values = [rule.value for rule in COMMIT_LOG_RULES]
    assert values[0] == "identity" and values[-1] == "group-gated-before-it-starts"
    # the 23 of runkernel/1, the three resume rules of I14, the three delegation rules of
    # I15, the gate round of a group of concurrent delegations (I8) and an attempt
    # started without its Executing commit (I5), a fork's first commit against its source,
    # and an app version recorded only on the activation
    assert len(values) == 33


def test_several_files_exit_with_the_highest_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legal = DATA / "legal" / "identity.jsonl"
    illegal = DATA / "illegal" / "run-edge.jsonl"
    not_a_trace = tmp_path / "garbage.jsonl"
    not_a_trace.write_bytes(b"not json\n")

    # several files are one trace: two legal files of other Threads are legal together
    other = DATA / "legal" / "one-active-run.jsonl"
    code, out, err = _check(capsys, legal, other)
    assert (code, err, out.count("\n")) == (0, "", 2)

    code, out, err = _check(capsys, legal, illegal)
    assert code == 1
    assert out.startswith(f"{legal}: legal: ")
    assert err.startswith(f"{illegal}:{MANIFEST['run-edge.jsonl']['line']}: run-edge: ")

    for order in ((legal, illegal, not_a_trace), (not_a_trace, illegal, legal)):
        code, out, err = _check(capsys, *order)
        assert code == 2
        assert err.count("\n") == 2  # one line per bad file, each file is judged
        assert f"{not_a_trace}:1: not-a-trace: " in err
        assert f"{illegal}:" in err


def _run_console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "check-trace", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_console_script_on_a_legal_and_an_illegal_file() -> None:
    legal = DATA / "legal" / "batch-approvals-and-denies.jsonl"
    done = _run_console(str(legal))
    assert done.returncode == 0
    assert done.stderr == ""
    assert done.stdout.count("\n") == 1 and done.stdout.startswith(f"{legal}: legal: ")

    illegal = DATA / "illegal" / "ticket-never-reused.jsonl"
    expected = MANIFEST[illegal.name]
    done = _run_console(str(illegal))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"{illegal}:{expected['line']}: {expected['rule']}: ")


_REGENERATE = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from make_examples import build
legal, illegal, manifest = build()
print(json.dumps({
    "files": {f"{folder}/{name}": hashlib.sha256(data).hexdigest()
              for folder, files in (("legal", legal), ("illegal", illegal)) for name, data in files.items()},
    "manifest": manifest,
}))
"""


def test_the_committed_examples_are_what_the_script_makes_now() -> None:
    """A change to the example builders (or to the kernel they drive) shows here, not
    as a silent diff the next time someone regenerates: the committed files are the
    script's output byte for byte. The script runs in a process of its own, its output
    is compared and nothing is written."""
    made = subprocess.run(
        [sys.executable, "-c", _REGENERATE, str(DATA)], capture_output=True, text=True, check=True
    )
    expected = json.loads(made.stdout)
    committed = {
        f"{path.parent.name}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest() for path in LEGAL + ILLEGAL
    }
    assert committed == expected["files"], sorted(
        name for name in set(committed) | set(expected["files"]) if committed.get(name) != expected["files"].get(name)
    )
    assert MANIFEST == expected["manifest"]
