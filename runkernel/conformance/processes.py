"""The store contract across processes: what ``StoreContract`` (``suite``) inherits and
runs once its subclass gives a ``store_factory`` fixture, a ``StoreFactory`` that opens
the storage of ``store`` in a child process (``"MODULE:ATTR"`` and its argument).

Crash atomicity: a child commits a Run step after step and prints each acknowledged
version; the parent kills it with SIGKILL at a random point, reopens the storage, and
holds it to every version printed: all there, versions contiguous, the Thread's head and
the Run's snapshot at the last one, the export legal by ``check_commits``, and each
commit's inbox settlement there with it, never without it; the next child continues
from there. And processes racing for leases, with their reads forced to
overlap (``racing``): one grant per attempt. Counts, not times: the random kill points
are drawn from a seed the test prints.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from runkernel.adapters.stores.contract import Store
from runkernel.conformance.child import race_in_child
from runkernel.conformance.racing import RACERS, StoreFactory, judge_race, race_in_processes, race_plan
from runkernel.conformance.runs import text_run
from runkernel.specs.checker import Verdict, check_commits

#: how many times a committing child is killed
KILLS = 8
#: the Run the children commit (more steps than they reach before the last kill)
STEPS = 1000
#: a kill lands this long at most after the acknowledgement it waited for: a random
#: point in one of the commits that follow (a bound on a wait, never asserted)
KILL_SPREAD = 0.01


def _child_environment() -> dict[str, str]:
    """The parent's import path, so a child imports the factory the parent does."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class ProcessContract:
    """The tests across processes; ``store`` and ``store_factory`` are ``StoreContract``'s."""

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """A ``StoreFactory`` that opens the storage of ``store`` in a child process;
        override it to run the tests across processes (they are skipped without it)."""
        pytest.skip("no store_factory fixture: give StoreContract a `store_factory` fixture to run the tests across processes")

    def test_a_child_killed_while_committing_loses_no_acknowledged_commit(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        seed = random.randrange(2**32)
        rng = random.Random(seed)
        commits = text_run("t-crash", "r-crash", STEPS)
        assert store.thread_head("t-crash") is None  # this instance has read the storage: it must read it again
        acknowledged = 0
        stored: list[int] = []
        for kill in range(KILLS):
            if len(stored) == len(commits):
                break  # the children committed the whole Run (a fast store): nothing left to kill
            child = subprocess.Popen(
                [sys.executable, "-m", "runkernel.conformance.child", "commit", store_factory.target,
                 store_factory.argument, "t-crash", "r-crash", str(STEPS)],
                stdout=subprocess.PIPE, env=_child_environment(),
            )
            assert child.stdout is not None
            wanted = rng.randint(1, 4)
            for _ in range(wanted):
                line = child.stdout.readline()
                if not line.endswith(b"\n"):
                    assert child.wait() == 0, f"the child failed (exit status {child.returncode})"
                    break  # it committed the whole Run
                acknowledged = int(line)
            time.sleep(rng.uniform(0, KILL_SPREAD))
            child.kill()
            child.wait()
            rest = child.stdout.read()
            child.stdout.close()
            for line in rest.splitlines(keepends=True):
                if line.endswith(b"\n"):
                    acknowledged = int(line)
            reopened = store_factory.open()
            try:
                stored = [c.version for c in reopened.commits("t-crash")]
                head, run = reopened.thread_head("t-crash"), reopened.run("r-crash")
                exported = list(reopened.commits("t-crash"))
                kept = reopened.commands("r-crash")
            finally:
                reopened.close()
            print(f"kill {kill + 1} (seed {seed}): acknowledged up to version {acknowledged}, stored {len(stored)}")
            assert stored == list(range(1, len(stored) + 1)), f"versions not contiguous: {stored}"
            assert len(stored) >= acknowledged, f"acknowledged version {acknowledged} was lost"
            assert head is not None and head.version == len(stored), "the Thread's head is not its last commit"
            assert run is not None and run.version == len(stored), "the Run's snapshot is not its last commit"
            assert exported == commits[: len(stored)]
            assert check_commits(exported).verdict is Verdict.LEGAL
            settled = sorted(e.outcome or "" for e in kept if e.state == "settled")
            assert settled == sorted(f"applied at {v}" for v in stored), "a commit and its settlement apart"
            assert len([e for e in kept if e.state == "pending"]) <= 1
        seen = [c.version for c in store.commits("t-crash")]
        assert seen == stored, f"an instance open all along sees versions 1..{len(seen)} of {len(stored)}"

    def test_processes_racing_for_a_lease_are_granted_it_once(self, store: Store, store_factory: StoreFactory) -> None:
        try:
            store_factory.open(clock=time.time).close()
        except TypeError:
            pytest.skip("the store factory refuses clock=: this store takes no clock, and the forced race needs one")
        outcomes = race_in_processes(RACERS, race_in_child, store_factory, race_plan())
        assert judge_race("processes", outcomes) == []


__all__ = ["ProcessContract"]
