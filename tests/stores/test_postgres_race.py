"""Eight processes commit to the same Runs on PostgreSQL at once: each append either
wins or gets a typed conflict, and the log holds every win exactly once (0 lost, 0
duplicated), versions 1..n without gap.

That they race is made by construction, not left to the scheduler: each process reads
every Run at version 1 and builds its commit, says it is ready, and appends only once
all are ready, so each Run's version 2 is won by one process and refused to the seven
others; then they race freely to the target."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter

from postgres_support import postgres_url
from runkernel.conformance import append_all
from runkernel.kernel.values import Role
from runkernel.testing import activate, text_run

__all__ = ["postgres_url"]

PROCESSES = 8
RUNS = 3
TARGET_VERSION = 50  # per Thread

_RACER = textwrap.dedent(
    """
    import json, sys
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.contract import CommitConflict
    from runkernel.testing import step
    from runkernel.kernel.protocol import InferenceResult

    url, me, runs, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = PostgresStore(url)
    wins, conflicts, seq = [], 0, 0
    done = set()
    first = []  # each Run's version 2, built from version 1 before anyone appends
    for index in range(runs):
        seq += 1
        first.append((f"{me}-{seq}", step(store.run(f"r{index}"), InferenceResult(f"{me}-{seq}")).commit))
    print("ready", flush=True)
    sys.stdin.readline()  # go: every process built its version 2s
    for tag, commit in first:
        try:
            store.append(commit)
        except CommitConflict:
            conflicts += 1
        else:
            wins.append(tag)
    while len(done) < runs:
        for index in range(runs):
            run_id = f"r{index}"
            snapshot = store.run(run_id)
            if snapshot.version >= target:
                done.add(run_id)
                continue
            seq += 1
            tag = f"{me}-{seq}"
            commit = step(snapshot, InferenceResult(tag)).commit
            try:
                store.append(commit)
            except CommitConflict:
                conflicts += 1
            else:
                wins.append(tag)
    store.close()
    print(json.dumps({"wins": wins, "conflicts": conflicts}))
    """
)


def test_eight_processes_race_on_the_same_runs_and_lose_nothing(postgres_url: str) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    for index in range(RUNS):
        decision = activate(f"t{index}", f"r{index}")
        assert decision.commit is not None
        append_all(store, [decision.commit])
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, postgres_url, f"p{n}", str(RUNS), str(TARGET_VERSION)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    for racer in racers:
        assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.close()
    results = []
    for racer in racers:
        assert racer.stdout is not None
        out = racer.stdout.read()
        assert racer.wait(timeout=300) == 0
        results.append(json.loads(out))
    wins = [tag for r in results for tag in r["wins"]]
    conflicts = sum(r["conflicts"] for r in results)
    logged: Counter[str] = Counter()
    for index in range(RUNS):
        commits = list(store.commits(f"t{index}"))
        assert [c.version for c in commits] == list(range(1, TARGET_VERSION + 1))
        logged.update(m.content for c in commits[1:] for m in c.messages if m.role is Role.ASSISTANT)
    store.close()
    lost = len(set(wins) - set(logged))
    duplicated = sum(n - 1 for n in logged.values() if n > 1) + len(wins) - len(set(wins))
    unknown = len(set(logged) - set(wins))
    print(
        f"race: processes {PROCESSES}, runs {RUNS}, wins {len(wins)}, conflicts {conflicts}, "
        f"lost {lost}, duplicated {duplicated}, unclaimed {unknown}"
    )
    assert len(wins) == RUNS * (TARGET_VERSION - 1)
    assert conflicts > 0  # they did race
    assert conflicts >= RUNS * (PROCESSES - 1)  # every version 2 but one per Run
    assert lost == 0 and duplicated == 0 and unknown == 0


def test_a_writer_commits_again_after_another_writer_moved_its_thread(postgres_url: str) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    first, second, third, fourth, *_ = text_run("t1", "r1", 4)
    mine, theirs = PostgresStore(postgres_url), PostgresStore(postgres_url)  # two processes' stores
    append_all(mine, [first, second])
    theirs.append(third)  # the Thread moved past mine's own last write
    snapshot = mine.run("r1")
    assert snapshot is not None and snapshot.version == third.version
    mine.append(fourth)  # built on the latest version: it must win
    assert [c.version for c in theirs.commits("t1")] == [1, 2, 3, 4]
    mine.close()
    theirs.close()
