"""Leases across processes on PostgreSQL (W3, W4): six processes take the lease of one
Run again and again (short leases, some released, some left to expire), commit under it
and stop at the first LeaseLost or conflict. In the log, every epoch belongs to one
worker, epochs never fall as versions rise (no commit under a lease that was taken
over), and every win is there exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter

from postgres_support import postgres_url
from runkernel.conformance.runs import activate
from runkernel.kernel.values import Role

__all__ = ["postgres_url"]

PROCESSES = 6
SECONDS = 3.0

_HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from runkernel.adapters.postgres_store import PostgresStore
    from runkernel.adapters.store import CommitConflict, LeaseHeld, LeaseLost
    from runkernel.conformance.runs import step
    from runkernel.kernel.protocol import InferenceResult

    url, me, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = PostgresStore(url)
    wins, held, refused, lost, seq = [], 0, 0, 0, 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            lease = store.acquire_lease("r0", me, 0.15)
        except LeaseHeld:
            refused += 1
            time.sleep(0.005)
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
        if seq % 2:
            store.release_lease(lease)  # else it is left to expire: a take-over by expiry
    store.close()
    print(json.dumps({"wins": wins, "held": held, "refused": refused, "lost": lost}))
    """
)


def test_leases_taken_over_across_processes_never_overlap(postgres_url: str) -> None:
    from runkernel.adapters.postgres_store import PostgresStore

    store = PostgresStore(postgres_url)
    decision = activate("t0", "r0")
    assert decision.commit is not None
    store.append(decision.commit)
    holders = [
        subprocess.Popen([sys.executable, "-c", _HOLDER, postgres_url, f"w{n}", str(SECONDS)], stdout=subprocess.PIPE, text=True)
        for n in range(PROCESSES)
    ]
    results = []
    for holder in holders:
        out, _ = holder.communicate(timeout=120)
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
        f"lost {lost}, duplicated {duplicated}"
    )
    assert len(owners) > PROCESSES  # the lease changed hands many times
    assert all(len(ids) == 1 for ids in owners.values())  # one worker per epoch (W3)
    assert epochs == sorted(epochs)  # nothing committed under a lease already taken over
    assert lost == 0 and duplicated == 0 and len(wins) == len(commits) - 1
