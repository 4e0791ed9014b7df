"""Crash-test your own agent: ``crashtest(app, scenario) -> CrashReport`` runs the app's
own model (or scripted turns), tools, gate and hooks with a crash at every commit
boundary of its crash-free Run, recovers each from the store alone, and reports what
broke and what the outside world saw (``runkernel crashtest --app MODULE:ATTR`` prints
the same report)::

    from runkernel.testing.crashtest import Scenario, crashtest

    def test_my_agent_survives_crashes():
        report = crashtest(app, Scenario(messages=("pay the invoice",)), reset=ledger.clear)
        assert report.passed, report.violations
        assert report.extra_starts_of("pay") == {}

See ``runner`` for how it runs, ``hosts`` for how one play drives the Run and its
delegations' child Runs (``watch``: what it counts and where it dies), ``judge`` for
what it checks (``places``: how calls of two plays are matched, and their values),
``scenario`` for the scenario file format and its JSON Schema, ``report`` for the text
and JSON reports.
"""

from __future__ import annotations

from runkernel.testing.crashtest.judge import ExtraStart, Violation
from runkernel.testing.crashtest.report import format_json, format_text
from runkernel.testing.crashtest.runner import CrashReport, CrashTestRefused, NotDeterministic, ToolStarts, Trial, crashtest
from runkernel.testing.crashtest.scenario import (
    Answer,
    BadScenario,
    Scenario,
    Turn,
    scenario_schema,
    scenarios_from_json,
)

__all__ = [
    "Answer",
    "BadScenario",
    "CrashReport",
    "CrashTestRefused",
    "ExtraStart",
    "NotDeterministic",
    "Scenario",
    "ToolStarts",
    "Trial",
    "Turn",
    "Violation",
    "crashtest",
    "format_json",
    "format_text",
    "scenario_schema",
    "scenarios_from_json",
]
