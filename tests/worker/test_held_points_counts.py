"""The held points' start counts survive a worker killed while it counts: with slots, the
test kills a worker at a point while another of its slots may be counting a start, and a
count that read back empty numbered the next starts from 1 again, so a planned point was
reached a second time, by a worker the test never acted on (a race test hung on it); and
a planned point counted by a worker killed before it said so was never said at all (the
4-slot race hung on that too, until its hang guard)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from held_points import HeldPoints

ROOT = Path(__file__).resolve().parent.parent.parent
#: each child counts starts without pause until it is killed
COUNTER = """
import sys
from pathlib import Path
from types import SimpleNamespace
from held_points import _hold
directory = Path(sys.argv[1])
call = SimpleNamespace(run_id="r1", lease_epoch=1)  # read only at a planned point: none here
while True:
    _hold(directory, "tool", "before", call)
"""
KILLS = 30


def test_a_count_never_starts_again_when_its_counter_is_killed_mid_count(tmp_path: Path) -> None:
    HeldPoints(tmp_path, [])  # no planned point: every start only counts
    counter = tmp_path / "count-tool-before"
    seen: list[int] = []
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    for _ in range(KILLS):
        before = _count(counter)
        child = subprocess.Popen([sys.executable, "-c", COUNTER, str(tmp_path)], env=env)
        while _count(counter) < before + 50 and child.poll() is None:
            time.sleep(0.001)  # the next look: it has counted some starts
        child.send_signal(signal.SIGKILL)
        child.wait()
        seen.append(_count(counter))
    print(f"counts after each of {KILLS} kills mid-count: {seen}")
    assert all(b > a for a, b in zip(seen, seen[1:])), f"a count started again: {seen}"


#: each child counts starts, every one a planned point already let go, until it is killed
SAYER = """
import sys
from pathlib import Path
from types import SimpleNamespace
from held_points import _hold
directory = Path(sys.argv[1])
call = SimpleNamespace(run_id="r1", lease_epoch=1)
while True:
    _hold(directory, "tool", "before", call)
"""
PLANNED = 5000


def test_a_planned_point_counted_by_a_worker_killed_mid_count_is_always_said(tmp_path: Path) -> None:
    # with slots, the test kills a worker at a point while another of its slots may be
    # counting a start: a point counted but never said was waited for until the hang guard
    points = HeldPoints(tmp_path, [f"tool:before:{n}" for n in range(1, PLANNED + 1)])
    for n in range(1, PLANNED + 1):
        (points.directory / f"tool:before:{n}.go").touch()  # let go at once
    counter = tmp_path / "count-tool-before"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    for _ in range(KILLS):
        before = _count(counter)
        child = subprocess.Popen([sys.executable, "-c", SAYER, str(tmp_path)], env=env)
        while _count(counter) < before + 20 and child.poll() is None:
            time.sleep(0.001)  # the next look: it has counted some starts
        child.send_signal(signal.SIGKILL)
        child.wait()
    counted = _count(counter)
    assert counted < PLANNED, "the plan ran out: more planned points needed"
    unsaid = [n for n in range(1, counted + 1) if not (tmp_path / f"tool:before:{n}.at").exists()]
    print(f"{KILLS} kills mid-count: {counted} starts counted, {len(unsaid)} counted and never said {unsaid}")
    assert unsaid == [], f"planned points counted that no worker said: {unsaid}"


def _count(counter: Path) -> int:
    text = counter.read_bytes() if counter.exists() else b""
    return int(text or b"0")
