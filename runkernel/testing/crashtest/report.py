"""The crash test's report: text a person reads at a glance (violations first, then
boundary kind x crash position with the outcome, then the tools), or JSON for CI."""

from __future__ import annotations

import collections
import json

import attrs

from runkernel.testing.crashtest.runner import CrashReport

#: Violations printed in full before the rest are counted.
SHOWN = 30


def format_text(report: CrashReport) -> str:
    """The report as text."""
    lines = [f"runkernel crashtest: app {report.app}, scenarios {', '.join(report.scenarios)}", ""]
    if report.violations:
        lines.append(f"violations ({len(report.violations)}):")
        for v in report.violations[:SHOWN]:
            tool = f" [{v.tool}]" if v.tool else ""
            lines.append(f"  {v.scenario} {v.boundary}: {v.rule}{tool}: {v.message}")
        if len(report.violations) > SHOWN:
            lines.append(f"  ... and {len(report.violations) - SHOWN} more (--format json lists them all)")
        lines.append("")
    boundaries = ", ".join(f"{name} {count}" for name, count in report.boundaries.items())
    lines.append(f"crashes: {report.crashes} (boundaries of the crash-free Run: {boundaries})")
    lines.append("")
    lines.append("by boundary kind x crash position (crashes: outcome, recovery row):")
    cells: dict[tuple[str, str], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for trial in report.trials:
        row = "/".join(trial.recovered) or "none"
        bad = " FAIL" if trial.violations else ""
        cells[(trial.position, trial.kind)][f"{trial.outcome} via {row}{bad}"] += 1
    for (position, kind), outcomes in sorted(cells.items()):
        shown = "; ".join(f"{n}x {what}" for what, n in sorted(outcomes.items()))
        lines.append(f"  {position:<14} {kind:<24} {shown}")
    changed = [t for t in report.trials if t.model_saw]
    if changed:
        lines += ["", "what the model saw differently after a recovery:"]
        for trial in changed[:SHOWN]:
            lines.append(f"  {trial.scenario} #{trial.index} {trial.boundary}: {'; '.join(trial.model_saw)}")
    lines += ["", "recoveries by row of the recovery table:"]
    for row, count in sorted(report.recoveries.items()):
        lines.append(f"  {row:<34}{count:>6}")
    lines += ["", "tools (extra executor starts per operation, beyond the crash-free Run's):"]
    for tools in report.tools.values():
        lines.append(f"  {tools.advice()}")
    if report.extra_starts:
        lines += ["", "where a tool ran again:"]
        for extra in report.extra_starts[:SHOWN]:
            verdict = "FAIL" if extra.failure else "allowed (replay)"
            lines.append(
                f"  {extra.scenario} {extra.boundary}: {extra.tool} operation {extra.operation_id} "
                f"+{extra.extra} start, {verdict}"
            )
        if len(report.extra_starts) > SHOWN:
            lines.append(f"  ... and {len(report.extra_starts) - SHOWN} more (--format json lists them all)")
    lines += ["", verdict_line(report)]
    return "\n".join(lines) + "\n"


def verdict_line(report: CrashReport) -> str:
    """The report's last line: PASS or FAIL, and every replay tool that started again
    (allowed, but said where the eye lands: a tool wrongly declared replay shows here)."""
    line = "verdict: " + ("PASS" if report.passed else f"FAIL, {len(report.violations)} violations")
    again = report.started_again()
    if again:
        line += "; replay tools that started again: " + ", ".join(f"{tool} (+{n})" for tool, n in again.items())
    return line


def format_json(report: CrashReport) -> str:
    """The report as one JSON object (``passed``, ``violations``, ``trials``, ``tools``,
    ``extra_starts``, ``started_again``, ``recoveries``, ``boundaries``)."""
    body = {
        "app": report.app,
        "passed": report.passed,
        "scenarios": report.scenarios,
        "crashes": report.crashes,
        "boundaries": report.boundaries,
        "violations": [attrs.asdict(v) for v in report.violations],
        "trials": [attrs.asdict(t) for t in report.trials],
        "tools": {name: attrs.asdict(t) for name, t in report.tools.items()},
        "extra_starts": [attrs.asdict(e) for e in report.extra_starts],
        "started_again": report.started_again(),
        "recoveries": dict(sorted(report.recoveries.items())),
    }
    return json.dumps(body, indent=2, sort_keys=False) + "\n"


__all__ = ["format_json", "format_text", "verdict_line"]
