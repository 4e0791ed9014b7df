"""``crashtest`` on an app whose model asks for a concurrent group (issue 34): a crash at
every boundary, the starts and ends of the group among them, passes; a group tool that
is declared replay but may run once at most is reported with the boundary where it
started again."""

from __future__ import annotations

from runkernel.testing.crashtest import CrashReport, crashtest
import crashtest_apps as apps


def _run(app: object, **options: object) -> CrashReport:
    report = crashtest(app, reset=apps.crashtest_reset, **options)  # type: ignore[arg-type]
    print(
        f"{report.app}: {report.crashes} crashes, {len(report.violations)} violations, "
        f"extra starts {[(e.tool, e.boundary, e.extra) for e in report.extra_starts]}, "
        f"recoveries {dict(report.recoveries)}"
    )
    return report


def test_an_app_with_a_concurrent_group_passes_every_boundary() -> None:
    report = _run(apps.group_clean)
    assert report.passed, report.violations
    assert report.crashes > 10
    assert {t.outcome for t in report.trials} == {"completed"}
    assert report.tools["charge"].most_extra == report.tools["reserve"].most_extra == 0
    assert "call_executing" in report.recoveries


def test_a_group_tool_declared_replay_that_may_run_once_is_reported_where_it_started_again() -> None:
    lenient = _run(apps.group_double_charge)
    assert lenient.passed  # replay says running twice is harmless ...
    assert lenient.extra_starts_of("charge")
    strict = _run(apps.group_double_charge, at_most_once=["charge"])  # ... unless it may run once at most
    assert not strict.passed
    # the charge started again after a crash right after its own start (the group's last),
    # and after a crash before the group's results were published
    assert {(v.rule, v.tool, v.boundary) for v in strict.violations} == {
        ("extra-start", "charge", "#13 charge attempt 1, after_tool_effect"),
        ("extra-start", "charge", "#14 v6 (charge) finalize, before_write"),
    }
