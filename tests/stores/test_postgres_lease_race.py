"""Leases across processes on PostgreSQL (W3, W4): six processes take the lease of one
Run again and again (released, and each one's last left to expire), commit under it
and stop at the first LeaseLost or conflict. In the log, every epoch belongs to one
worker, epochs never fall as versions rise (no commit under a lease that was taken
over), and every win is there exactly once.

The race is made by construction, not by a time budget: the processes start together
(each says it is ready, then all are told to go), and each goes on until it has
committed under ROUNDS leases of its own, so more than PROCESSES epochs hold commits
at any machine load (load only makes it slower: a commit too late for its lease is
refused, and its process takes another lease). Each process then waits until another
took its last lease over after its expiry (all but the last to finish are) and tries
one more commit under it, which must be refused. Whether a process is the last is read
before the lease it checks, so a process descheduled between its reads decides the same
way (the "stalled-check" case stalls every process there for twice the lease: with the
reads the other way round, two processes said "not taken over", as one run under load
once did)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from postgres_support import postgres_url
from runkernel.kernel.values import Role
from runkernel.testing import activate

__all__ = ["postgres_url"]

PROCESSES = 6
ROUNDS = 2  # leases each process commits under before it stops
LEASE = 1.0  # seconds: how long the next process waits for a lease left to expire

_HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.contract import CommitConflict, LeaseHeld, LeaseLost
    from runkernel.testing import step
    from runkernel.kernel.protocol import InferenceResult

    from pathlib import Path

    url, me, rounds, duration = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    done, processes, stall = Path(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    store = PostgresStore(url)
    wins, held, refused, lost, seq = [], 0, 0, 0, 0
    print("ready", flush=True)
    sys.stdin.readline()  # go: every process is ready
    while len({epoch for _, epoch in wins}) < rounds:
        try:
            lease = store.acquire_lease("r0", me, duration)
        except LeaseHeld:
            refused += 1
            time.sleep(0.01)
            continue
        held += 1
        for _ in range(3):
            seq += 1
            tag = f"{me}-{seq}"
            try:
                store.append(step(store.run("r0"), InferenceResult(tag)).commit, lease=lease)
            except (LeaseLost, CommitConflict):
                lost += 1
                break
            wins.append([tag, lease.epoch])
        if len({epoch for _, epoch in wins}) < rounds:
            store.release_lease(lease)  # the last is left to expire: a take-over by expiry
    (done / me).touch()
    late = "not taken over"  # the last process to finish: nobody is left to take it over
    while True:
        # whether every process is done is read BEFORE the lease: no lease is taken after
        # the last one is done, so a lease not taken over then never will be. Read after,
        # a process descheduled between the two reads missed the take-over of the last
        # process to finish, and two processes said "not taken over" (once, under load)
        everyone_done = len(list(done.iterdir())) == processes
        head = store.run("r0")
        current, writer = store.current_lease("r0"), store.writer_of("t0", head.version)
        time.sleep(stall)  # a process descheduled between what it read and what it decides
        taken = current is not None and current.epoch > lease.epoch
        if taken or (writer is not None and writer.epoch > lease.epoch):
            seq += 1
            tag = f"{me}-{seq}"
            try:
                store.append(step(head, InferenceResult(tag)).commit, lease=lease)
            except (LeaseLost, CommitConflict):
                late = "refused"
            else:
                wins.append([tag, lease.epoch])
                late = "accepted"
            break
        if everyone_done:
            break
        time.sleep(0.01)
    store.close()
    print(json.dumps({"wins": wins, "held": held, "refused": refused, "lost": lost, "late": late}))
    """
)


@pytest.mark.parametrize("stall", [0.0, 2 * LEASE], ids=["no-stall", "stalled-check"])
def test_leases_taken_over_across_processes_never_overlap(postgres_url: str, tmp_path: Path, stall: float) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    decision = activate("t0", "r0")
    assert decision.commit is not None
    store.append(decision.commit)
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", _HOLDER, postgres_url, f"w{n}", str(ROUNDS), str(LEASE), str(tmp_path),
             str(PROCESSES), str(stall)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for n in range(PROCESSES)
    ]
    for holder in holders:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    for holder in holders:
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.close()
    results = []
    for holder in holders:
        assert holder.stdout is not None
        out = holder.stdout.read()
        assert holder.wait(timeout=300) == 0
        assert holder.returncode == 0
        results.append(json.loads(out))
    commits = list(store.commits("t0"))
    writers = [store.writer_of("t0", c.version) for c in commits[1:]]
    store.close()
    assert all(w is not None for w in writers)
    epochs = [w.epoch for w in writers if w is not None]
    owners: dict[int, set[str]] = {}
    for w in writers:
        assert w is not None
        owners.setdefault(w.epoch, set()).add(w.worker_id)
    wins = [tag for r in results for tag, _ in r["wins"]]
    logged = Counter(m.content for c in commits[1:] for m in c.messages if m.role is Role.ASSISTANT)
    lost = len(set(wins) - set(logged))
    duplicated = sum(n - 1 for n in logged.values() if n > 1)
    print(
        f"lease race: processes {PROCESSES}, leases taken {sum(r['held'] for r in results)}, "
        f"refused while held {sum(r['refused'] for r in results)}, epochs with commits {len(owners)}, "
        f"commits {len(wins)}, stopped by a lost lease or conflict {sum(r['lost'] for r in results)}, "
        f"late commits under a lease taken over {Counter(r['late'] for r in results)}, "
        f"lost {lost}, duplicated {duplicated}"
    )
    assert len(owners) > PROCESSES  # the lease changed hands many times
    assert all(len({epoch for _, epoch in r["wins"]}) >= ROUNDS for r in results)
    assert all(len(ids) == 1 for ids in owners.values())  # one worker per epoch (W3)
    assert epochs == sorted(epochs)  # nothing committed under a lease already taken over
    assert lost == 0 and duplicated == 0 and len(wins) == len(commits) - 1
    assert sorted(r["late"] for r in results) == ["not taken over"] + ["refused"] * (PROCESSES - 1)  # W3
