"""The latency groups' rows (``bench/latency.py``, ``bench/loop_lag.py``): one process
draining N Runs that wait on their model and tool, beside DBOS; the overlap; the goal of
issue 33 (20 Runs in at most 3× one Run's time); the loop lag of an asyncio host."""

from __future__ import annotations

from bench import latency, loop_lag, slow_disk
from bench.framework import Goal, Row, Sample, SideRef, Show, Sizes, speedup
from bench.worker_rows import side_name

STORES = (("latency/sqlite", "SQLite"), ("latency/postgres", "PostgreSQL"))
LAG_GROUP = "latency/loop-lag"
DRAIN_GOAL = 3.0

DRAIN_LIMIT = (
    "one Run's latency plus what its slots add: the 20 Runs start together, so their commits reach the"
    " store at the same moments (SQLite: one writer at a time; PostgreSQL: a flush each) and wait in"
    " turn, and slots are filled by polls (`--poll 0.05`); the median read 1.49× and 1.10× (SQLite),"
    " 1.09× and 1.05× (PostgreSQL) in two runs of 3 rounds on 2026-12-07"
)
DBOS_LIMIT = (
    "both sides overlap the same sleeps in threads (slots, DBOS's executor), so the ratio is the work"
    " around them: runkernel's 7 commits and its lease per Run against DBOS's workflow and step rows,"
    " and the polls that fill free slots; near 1.0 the shared cores' noise decides a round (20 Runs:"
    " min 0.85 and 1.08 on SQLite, 1.01 and 1.00 on PostgreSQL, in two runs on 2026-12-07)"
)
SLOTLESS_LIMIT = (
    "the worker drives one Run at a time, so N Runs take N Runs' latency one after the"
    " other; what lifts it: slots (`runkernel worker --concurrency N`, issue 33 item 1)"
)


def drained(unit: str) -> Show:
    """``12.3 Runs/s (1.63 s for 20)``."""

    def show(sample: Sample) -> str:
        return f"{sample.units / max(sample.seconds, 1e-9):.2f} {unit}/s ({sample.seconds:.2f} s for {sample.units:,})"

    return show


def drain_ratio(a: Sample, b: Sample | None) -> float:
    """N Runs' drain time ÷ one Run's (whole drains, not per Run)."""
    assert b is not None
    return a.seconds / max(b.seconds, 1e-9)


def overlap(a: Sample, b: Sample | None) -> float:
    """Runs/s ÷ (min(N, slots) ÷ one Run's time): 1.0 is perfect overlap."""
    assert b is not None
    ideal = min(a.units, a.counts["slots"]) / max(b.seconds, 1e-9)
    return (a.units / max(a.seconds, 1e-9)) / max(ideal, 1e-12)


def lag_ms(a: Sample, b: Sample | None) -> float:
    """The 99th percentile of the probe's lateness, in ms."""
    return a.counts["lag_p99"] * 1e3


def lag_show(sample: Sample) -> str:
    """``p50 0.1 ms, p99 2.3 ms, max 9.9 ms (150 wakes)``."""
    c = sample.counts
    return (
        f"p50 {c['lag_p50'] * 1e3:.2f} ms, p99 {c['lag_p99'] * 1e3:.2f} ms, max {c['lag_max'] * 1e3:.1f} ms"
        f" ({c['wakes']:,.0f} wakes)"
    )


def rows(sizes: Sizes) -> list[Row]:
    """Every latency row: per store the goal, then per N the DBOS ratio and the overlap;
    then the loop lag per store and N."""
    slots = latency.slots()
    sleep = sizes.latency_sleep
    unit = f"3 calls of {sleep:g} s"
    drain_limit, dbos_limit = (SLOTLESS_LIMIT, SLOTLESS_LIMIT) if slots == 1 else (DRAIN_LIMIT, DBOS_LIMIT)
    slotted = f"{slots} slot{'s' if slots != 1 else ''}"
    first = sizes.latency_runs[0]
    table: list[Row] = []
    for group, store in STORES:
        one = SideRef(group, side_name("runkernel", latency.ONE))
        table.append(
            Row(
                f"one process, default slots ({slots}), {store}: {first} Runs' drain time ÷ one Run's (a Run: {unit})",
                SideRef(group, side_name("runkernel", first)),
                one,
                drain_ratio,
                "× one Run",
                Goal("<=", DRAIN_GOAL, f"≤ {DRAIN_GOAL:g}×"),
                drained("Runs"),
                drained("Runs"),
                drain_limit,
            )
        )
        for runs in sizes.latency_runs:
            table.append(
                Row(
                    f"{runs} Runs ({unit}) drained by one process, {store}: runkernel Runs/s ÷ DBOS workflows/s"
                    f" (runkernel: {slotted}; DBOS: queue worker_concurrency={slots})",
                    SideRef(group, side_name("runkernel", runs)),
                    SideRef(group, side_name("DBOS", runs)),
                    speedup,
                    "ratio",
                    Goal(">=", 1.0, "≥ 1.0"),
                    drained("Runs"),
                    drained("workflows"),
                    dbos_limit,
                )
            )
            table.append(
                Row(
                    f"overlap, {runs} Runs, {store}: runkernel Runs/s ÷ (min({runs}, {slotted}) ÷ one Run's time)",
                    SideRef(group, side_name("runkernel", runs)),
                    one,
                    overlap,
                    "of perfect",
                    None,
                    drained("Runs"),
                    drained("Runs"),
                )
            )
    runs = sizes.latency_runs[-1]
    table.append(
        Row(
            f"{runs} Runs that do not wait, drained by one process, PostgreSQL whose every flush waits"
            f" {slow_disk.SLOW_MS} ms: runkernel Runs/s ÷ DBOS workflows/s (runkernel: {slotted}; DBOS: queue"
            f" worker_concurrency={slots}; for the record)",
            SideRef(slow_disk.GROUP, side_name("runkernel", runs)),
            SideRef(slow_disk.GROUP, side_name("DBOS", runs)),
            speedup,
            "ratio",
            None,
            drained("Runs"),
            drained("workflows"),
        )
    )
    for _, store in loop_lag.STORES:
        for runs in sizes.latency_runs:
            table.append(
                Row(
                    f"loop lag of an asyncio host, {store}: p99 lateness of a {loop_lag.PROBE * 1e3:.0f} ms"
                    f" asyncio.sleep while AsyncDriver drives {runs} Runs ({unit}) on the loop (peer: the bare loop)",
                    SideRef(LAG_GROUP, loop_lag.side(store, runs)),
                    SideRef(LAG_GROUP, loop_lag.side(loop_lag.BARE, runs)),
                    lag_ms,
                    "ms",
                    None,
                    lag_show,
                    lag_show,
                )
            )
    return table
