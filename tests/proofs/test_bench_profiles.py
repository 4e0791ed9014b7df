"""A row that misses its goal shows where runkernel's time went, measured in the same
run (``bench/profiles.py``): the profile names the code that took the time, and the
report puts it under that row and nowhere else."""

from __future__ import annotations

from bench.framework import Goal, Row, Sample, SideRef, SideResult, Sizes, speedup
from bench.profiles import area, profile, profile_key
from bench.report import render
from bench.rows import rows
from bench.framework import QUICK
from runkernel.kernel.values import json_problem

WIDE = {f"key {n}": [n, f"value {n}", {"inner": [True, None, 1.5]}] for n in range(200)}


def test_the_profile_names_the_function_and_the_area_that_took_the_time() -> None:
    found = profile(lambda: json_problem(WIDE), seconds=0.2)
    print(found)
    calls, by_area, by_function = found.split("; ")
    assert int(calls.split()[0].replace(",", "")) >= 1
    assert by_area.startswith("by area: runkernel.kernel ")
    assert by_function.startswith("top functions: `json_problem` (runkernel/kernel/values.py:")


def test_work_made_ahead_is_called_at_most_as_often_as_it_lasts() -> None:
    calls: list[int] = []
    profile(lambda: calls.append(1), seconds=1.0, most=3)
    assert len(calls) == 1 + 3


def test_built_ins_and_generated_code_have_their_own_areas() -> None:
    assert area(("~", 0, "<method 'execute' of 'sqlite3.Connection' objects>")) == "sqlite3 (C)"
    assert area(("~", 0, "<method 'decode' of 'msgspec.json.Decoder' objects>")) == "msgspec (C)"
    assert area(("<attrs generated methods runkernel.kernel.state.ToolCall>", 40, "__init__")).startswith("attrs")
    assert area(("/x/runkernel/adapters/stores/sqlite/store.py", 1, "append")) == "runkernel stores"


def _render(verdict_sample: Sample) -> str:
    row = Row("a row", SideRef("g", "ours"), SideRef("g", "theirs"), speedup, "ratio", Goal(">=", 1.0, "≥ 1"),
              lambda s: "x", lambda s: "y", "what limits it")
    results = {"g": {"ours": SideResult([verdict_sample]), "theirs": SideResult([Sample(1.0, 1)])}}
    notes = {"g": {profile_key("ours"): "MEASURED PROFILE", "other": "a note"}}
    sizes: Sizes = QUICK
    return render([row], results, notes, sizes=sizes, fsync="-", seconds=1.0,
                  load=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)), argv=["python", "-m", "bench"])


def test_the_profile_is_shown_under_a_row_that_misses_and_only_there() -> None:
    missing = _render(Sample(2.0, 1))  # half the peer's rate: misses "≥ 1"
    assert "- a row: what limits it\n  - where runkernel's time went" in missing
    assert missing.count("MEASURED PROFILE") == 1
    assert "- g (other): a note" in missing
    passing = _render(Sample(0.5, 1))
    assert "MEASURED PROFILE" not in passing


def test_every_row_that_has_a_goal_and_a_runkernel_side_says_what_limits_it() -> None:
    assert [row.name for row in rows(QUICK) if row.goal is not None and not row.limit] == []
