"""W4 on PostgreSQL: a connection cut after the server committed and before its answer
reached the store is retried by identity and version: the commit is adopted, never
written twice and never reported as a conflict; a connection cut before the server saw
the commit sends it again, once; another writer's commit at that version is a conflict."""

from __future__ import annotations

import urllib.parse

import attrs
import pytest

from pg_proxy import Cut, CuttingProxy
from postgres_support import postgres_url
from runkernel.adapters.store import CommitConflict
from runkernel.conformance import text_run

__all__ = ["postgres_url"]


def _through(proxy: CuttingProxy, url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    query = parts.query + ("&" if parts.query else "") + "sslmode=disable"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}", query=query))


def check_writer(url: str, version: int) -> object:
    from runkernel.adapters.postgres_store import PostgresStore

    store = PostgresStore(url)
    try:
        return store.writer_of("t1", version)
    finally:
        store.close()


def _proxy(url: str, cuts: dict[int, Cut]) -> CuttingProxy:
    parts = urllib.parse.urlsplit(url)
    return CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432, cuts)


@pytest.mark.parametrize("leased", [False, True], ids=["unleased", "leased"])
def test_a_lost_acknowledgement_is_adopted_never_written_twice(postgres_url: str, leased: bool) -> None:
    from runkernel.adapters.postgres_store import PostgresStore

    commits = text_run("t1", "r1", 40)
    cuts = {n: Cut.AFTER_COMMIT for n in range(3, len(commits) + 1, 4)}
    proxy = _proxy(postgres_url, cuts)
    store = PostgresStore(_through(proxy, postgres_url))
    lease = store.acquire_lease("r1", "worker-a", 600) if leased else None
    conflicts = 0
    for commit in commits:
        try:
            store.append(commit, lease=lease)
        except CommitConflict:
            conflicts += 1
    store.close()
    proxy.close()
    check = PostgresStore(postgres_url)
    stored = list(check.commits("t1"))
    check.close()
    versions = [c.version for c in stored]
    lost = len(set(range(1, len(commits) + 1)) - set(versions))
    duplicated = len(versions) - len(set(versions))
    writers = {check_writer(postgres_url, c.version) for c in commits}
    assert writers == {None if lease is None else lease.writer}
    print(
        f"lost-ack ({'leased' if leased else 'unleased'}): commits {len(commits)}, "
        f"acknowledgements cut after COMMIT {len(proxy.cut_done)}, "
        f"adopted {store.adopted_after_lost_ack}, conflicts {conflicts}, lost {lost}, duplicated {duplicated}"
    )
    assert len(proxy.cut_done) == len(cuts) > 5
    assert all(cut is Cut.AFTER_COMMIT for _, cut in proxy.cut_done)
    assert store.adopted_after_lost_ack == len(cuts)
    assert conflicts == 0 and lost == 0 and duplicated == 0
    assert stored == commits


def test_a_commit_cut_before_the_server_saw_it_is_sent_again_once(postgres_url: str) -> None:
    from runkernel.adapters.postgres_store import PostgresStore

    commits = text_run("t1", "r1", 20)
    cuts = {n: Cut.BEFORE_SERVER for n in (2, 5, 9, 14)}
    proxy = _proxy(postgres_url, cuts)
    store = PostgresStore(_through(proxy, postgres_url))
    for commit in commits:
        store.append(commit)
    store.close()
    proxy.close()
    check = PostgresStore(postgres_url)
    stored = list(check.commits("t1"))
    check.close()
    print(
        f"cut before the server: commits {len(commits)}, cuts {len(proxy.cut_done)}, "
        f"adopted {store.adopted_after_lost_ack}, stored {len(stored)}"
    )
    assert len(proxy.cut_done) == 4
    assert store.adopted_after_lost_ack == 0  # nothing had landed: each was sent again
    assert stored == commits


def test_another_writers_commit_at_that_version_is_a_conflict_after_a_cut(postgres_url: str) -> None:
    from runkernel.adapters.postgres_store import PostgresStore

    commits = text_run("t1", "r1", 3)
    proxy = _proxy(postgres_url, {3: Cut.BEFORE_SERVER})
    store = PostgresStore(_through(proxy, postgres_url))
    rival = PostgresStore(postgres_url)
    store.append(commits[0])
    store.append(commits[1])
    rival_commit = attrs.evolve(commits[2], messages=(attrs.evolve(commits[2].messages[0], content="rival"),))

    def rival_writes_first(_: object) -> None:
        store.before_commit = None
        rival.append(rival_commit)

    store.before_commit = rival_writes_first
    with pytest.raises(CommitConflict):
        store.append(commits[2])
    stored = list(rival.commits("t1"))
    print(f"rival after a cut: cuts {len(proxy.cut_done)}, stored {len(stored)}, last is the rival's")
    assert stored == commits[:2] + [rival_commit]
    store.close()
    rival.close()
    proxy.close()
