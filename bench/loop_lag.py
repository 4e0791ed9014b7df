"""Loop lag of an asyncio host: how late a 10 ms ``asyncio.sleep`` wakes while
``AsyncDriver`` drives N Runs on the same event loop, on SQLite and on PostgreSQL,
beside the same loop with the same sleeps and no driver (the bare loop: what asyncio and
this machine's load cost alone).

A side's round: one ``asyncio.run`` in the bench's process with N tasks, each driving a
Run of ``subject.drive_sleeping_run`` (three calls awaiting ``latency_sleep`` each, one
driver per Run, one store shared by all), and a probe task that sleeps 10 ms over and
over until they are done, recording each wake's lateness (the time past 10 ms). A store
call made inline on the loop shows up as lateness: every wake that falls while it runs
waits for it. The sample's counts are the lateness's median, 99th percentile and
maximum, in seconds.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import subject
from bench.framework import Prepared, Sample, Sizes

PROBE = 0.01
"""The probe's sleep, in seconds."""
STORES = (("sqlite", "SQLite"), ("postgres", "PostgreSQL"))
BARE = "bare loop"


def side(store: str, runs: int) -> str:
    """``AsyncDriver SQLite 20``, ``bare loop 20``: the group's side names."""
    return f"{BARE} {runs}" if store == BARE else f"AsyncDriver {store} {runs}"


async def _probed(work: list[Awaitable[object]]) -> tuple[float, list[float]]:
    """Run ``work`` beside the probe; the seconds it took and each wake's lateness."""
    loop = asyncio.get_running_loop()
    late: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            asked = loop.time()
            await asyncio.sleep(PROBE)
            late.append(max(0.0, loop.time() - asked - PROBE))

    watcher = asyncio.create_task(probe())
    began = time.perf_counter()
    try:
        await asyncio.gather(*work)
    finally:
        done.set()
        await watcher
    return time.perf_counter() - began, late


def lag_sample(seconds: float, runs: int, late: list[float]) -> Sample:
    """A sample: the drain's time and the lateness's median, p99 and maximum."""
    ordered = sorted(late) or [0.0]
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    counts = {"lag_p50": statistics.median(ordered), "lag_p99": p99, "lag_max": ordered[-1], "wakes": float(len(late))}
    return Sample(seconds, runs, counts)


def _driven(store: Callable[[], Any], runs: int, sleep: float) -> Callable[[], Sample]:
    def measure() -> Sample:
        opened = store()
        seconds, late = asyncio.run(_probed([subject.drive_sleeping_run(opened, sleep) for _ in range(runs)]))
        return lag_sample(seconds, runs, late)

    return measure


async def _bare_run(sleep: float) -> None:
    for _ in range(3):
        await asyncio.sleep(sleep)


def _bare(runs: int, sleep: float) -> Callable[[], Sample]:
    def measure() -> Sample:
        seconds, late = asyncio.run(_probed([_bare_run(sleep) for _ in range(runs)]))
        return lag_sample(seconds, runs, late)

    return measure


def _once(make: Callable[[], Any]) -> Callable[[], Any]:
    """The store, opened at its side's first round (a missing server marks only its sides)."""
    made: list[Any] = []

    def get() -> Any:
        if not made:
            made.append(make())
        return made[0]

    return get


def loop_lag(sizes: Sizes, scratch: Path) -> Prepared:
    """Every N: the bare loop, AsyncDriver on SQLite (WAL, synchronous=FULL), on PostgreSQL."""
    from bench.postgres import _fresh_store

    directory = scratch / "loop-lag"
    directory.mkdir()
    stores = {
        "SQLite": _once(lambda: subject.sqlite_store(directory / "lag.db", "FULL")),
        "PostgreSQL": _once(lambda: subject.postgres_store(_fresh_store("lag"))),
    }
    sides: dict[str, Callable[[], Sample]] = {}
    for runs in sizes.latency_runs:
        sides[side(BARE, runs)] = _bare(runs, sizes.latency_sleep)
        for _, label in STORES:
            sides[side(label, runs)] = _driven(stores[label], runs, sizes.latency_sleep)
    notes = {
        "probe": f"a {PROBE * 1e3:.0f} ms asyncio.sleep repeated while N Runs of 3 calls of {sizes.latency_sleep:g} s"
        " are driven, one AsyncDriver each, one store shared by them",
    }
    return Prepared(sides, notes)
