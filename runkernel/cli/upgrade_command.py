"""``runkernel upgrade-check``: whether a new app can continue every live Run of its name
(``runkernel.adapters.worker.upgrade``), as a table or JSON; exit 0 only if every Run
can continue, 1 if one is blocked, 2 for a usage error. ``--accept`` then records the
new version as able to drive the versions it checked; refused (exit 1, nothing
written) when a Run is blocked."""

from __future__ import annotations

import argparse
import json
import sys

from runkernel.adapters.worker.apps import AppLoadError, load_app, version_of
from runkernel.adapters.worker.upgrade import RunVerdict, UpgradeReport, accept_upgrade, upgrade_check
from runkernel.errors import UpgradeBlocked, VersionRequired
from runkernel.cli.commands import _opened, _store_option
from runkernel.cli.text import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, CliError, ProgressBar, plural, printable

#: With more Runs than this, progress goes to stderr while the check reads them.
PROGRESS_FROM = 200


def _upgrade_check(args: argparse.Namespace) -> int:
    try:
        app = load_app(args.app)
        version_of(app)  # an app whose tools are listed while it runs must declare its version
    except (AppLoadError, VersionRequired) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    with _opened(args.store, read_only=not args.accept, command="upgrade-check") as store:
        bar = ProgressBar(sys.stderr, "upgrade-check")

        def progress(done: int, total: int) -> None:
            if total > PROGRESS_FROM:
                bar.show(done, total, f"{done}/{total} runs checked")

        report = upgrade_check(store, app, progress=progress)
        accepted: frozenset[str] | None = None
        refused: str | None = None
        if args.accept:
            try:
                accepted = accept_upgrade(store, report)
            except UpgradeBlocked as error:
                refused = str(error)
    if args.format == "json":
        print(json.dumps(_report_json(report, accepted), indent=2, ensure_ascii=False))
    else:
        _print_table(report)
        if accepted is not None:
            print(_accepted_line(report, accepted))
    if refused is not None:
        raise CliError(f"--accept refused: {refused}")
    return EXIT_OK if report.can_continue_all else EXIT_FAILURE


def _accepted_line(report: UpgradeReport, accepted: frozenset[str]) -> str:
    if not accepted:
        return (
            f"accepted: nothing to record; no live run of app {printable(report.app)} recorded a version "
            f"other than {printable(report.version)}"
        )
    versions = ", ".join(printable(v) for v in sorted(accepted))
    return f"accepted: workers of {printable(report.app)} version {printable(report.version)} may drive runs of {versions}"


def _report_json(report: UpgradeReport, accepted: frozenset[str] | None) -> dict[str, object]:
    return {
        "app": report.app,
        "version": report.version,
        "runs": [v.to_json() for v in report.verdicts],
        "continue": sum(v.can_continue for v in report.verdicts),
        "blocked": sum(not v.can_continue for v in report.verdicts),
        # the versions --accept recorded the new one able to drive (null: not asked, or refused)
        "accepted": None if accepted is None else sorted(accepted),
    }


def _why(verdict: RunVerdict) -> list[str]:
    """The lines under a Run's row: what blocks it, then its policy differences and notes."""
    return (
        [f"blocked: {r}" for r in verdict.reasons]
        + [f"policy: {d}" for d in verdict.policy_differences]
        + [f"note: {n}" for n in verdict.notes]
    )


def _print_table(report: UpgradeReport) -> None:
    rows: list[tuple[str, ...]] = [("RUN", "THREAD", "STATE", "VERSION", "VERDICT")]
    for v in report.verdicts:
        rows.append(tuple(printable(c) for c in (v.run_id, v.thread_id, v.state, v.app_version or "-", v.verdict)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = sys.stdout
    out.write("  ".join(c.ljust(w) for c, w in zip(rows[0], widths)).rstrip() + "\n")
    for row, verdict in zip(rows[1:], report.verdicts):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
        for line in _why(verdict):
            out.write(f"    {printable(line)}\n")
    blocked = sum(not v.can_continue for v in report.verdicts)
    live = len(report.verdicts)
    out.write(
        f"{plural(live, 'live run')} of app {printable(report.app)}: "
        f"{live - blocked} can continue, {blocked} blocked\n"
    )


def register_upgrade(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``upgrade-check`` to the parser."""
    check = commands.add_parser(
        "upgrade-check",
        help="say, per live Run of an app, whether new code can continue it",
        description=(
            "For every Run of the app's name that is not Ended, say from committed state alone whether the new "
            "app can continue it: the tools of its open calls exist, its wait and staged state are accepted. "
            "Exit 0 only if every live Run can continue, 1 if one is blocked. --accept then records the new "
            "version as able to drive the versions the Runs recorded; refused, nothing written, if one is blocked."
        ),
    )
    _store_option(check)
    check.add_argument(
        "--app", required=True, metavar="MODULE:ATTR", help="the new app, loaded as runkernel worker --app loads it"
    )
    check.add_argument(
        "--accept",
        action="store_true",
        help="if every live Run can continue, record the new version as able to drive the versions checked",
    )
    check.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    check.set_defaults(handler=_upgrade_check)
