"""Hypothesis profiles for the whole suite.

``ci`` (the default) is derandomized and bounded so CI is reproducible and fast;
``deep`` explores far more examples for runs from the benchmarks or by hand:

    HYPOTHESIS_PROFILE=deep python -m pytest tests/kernel/test_decide_properties.py

Hypothesis loads a built-in profile named ``ci`` on its own when ``CI=true``;
registering ours under the same name replaces it, and we select the profile
explicitly so the environment variable alone decides.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "deep",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
# proofs/mutants.py: like ci, but stop at the first failure without shrinking it
settings.register_profile(
    "mutant",
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    report_multiple_bugs=False,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per group of skipped tests: how many, and the reason, which names what
    enables them (a server's DSN, an extra to install, root)."""
    groups = skipped_groups(terminalreporter.stats.get("skipped", []))
    if not groups:
        return
    terminalreporter.write_sep("-", "skipped tests, by what would enable them")
    for reason, count in groups:
        terminalreporter.write_line(f"{count:5d} skipped: {reason}")


def skipped_groups(reports: list[pytest.TestReport]) -> list[tuple[str, int]]:
    """(reason, count) per distinct skip reason, most tests first."""
    counts: Counter[str] = Counter()
    for report in reports:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        counts[reason.removeprefix("Skipped: ")] += 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
