"""The catalogue of planted bugs (``proofs/mutants.py``) stays runnable as the code moves:
each mutant's text is found exactly once in its file, and each test it names as its
detector exists. Either slip would otherwise show only when CI runs the whole catalogue,
as a detector that "fails on clean code" (a renamed test) or a refused mutant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
ROOT = PROOFS.parent
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the catalogue is a script's module

from mutants import MUTANTS  # noqa: E402


def test_every_mutant_text_occurs_exactly_once_in_its_file() -> None:
    misplaced = [
        f"{m.name}: {m.path} holds its text {(ROOT / m.path).read_text(encoding='utf-8').count(m.old)} times"
        for m in MUTANTS
        if (ROOT / m.path).read_text(encoding="utf-8").count(m.old) != 1
    ]
    assert misplaced == []


def test_every_test_a_mutant_names_as_its_detector_exists() -> None:
    named = {
        arg for m in MUTANTS for arg in m.detector.argv if "::" in arg and arg.startswith("tests/")
    }
    files = sorted({test_id.split("::")[0] for test_id in named})
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.splitlines()
    # a named id is a test function, or one of its cases
    found = {line.split("[")[0] for line in collected if "::" in line} | set(collected)
    missing = sorted(test_id for test_id in named if test_id not in found)
    assert missing == [], missing
