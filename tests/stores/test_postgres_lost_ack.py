"""W4 on PostgreSQL: a connection cut after the server committed and before its answer
reached the store is retried by identity and version: the commit is adopted, never
written twice and never reported as a conflict; a connection cut before the server saw
the commit sends it again, once; another writer's commit at that version is a conflict,
even when it is this very commit, byte for byte, written under another lease."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

import attrs
import pytest

from pg_proxy import Cut, CuttingProxy
from postgres_support import postgres_url
from runkernel.adapters.stores.contract import CommitConflict, Writer
from runkernel.kernel.state import RunSnapshot
from runkernel.testing import text_run

__all__ = ["postgres_url"]


def _through(proxy: CuttingProxy, url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    query = parts.query + ("&" if parts.query else "") + "sslmode=disable"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}", query=query))


def check_writer(url: str, version: int) -> object:
    from runkernel.adapters.stores.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        return store.writer_of("t1", version)
    finally:
        store.close()


def _named(cuts: list[tuple[int, Cut]]) -> str:
    return ", ".join(f"commit {n} {cut.value}" for n, cut in cuts)


def _proxy(url: str, cuts: dict[int, Cut]) -> CuttingProxy:
    parts = urllib.parse.urlsplit(url)
    return CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432, cuts)


@pytest.mark.parametrize("leased", [False, True], ids=["unleased", "leased"])
def test_a_lost_acknowledgement_is_adopted_never_written_twice(postgres_url: str, leased: bool) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

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
    from runkernel.adapters.stores.postgres import PostgresStore

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
    from runkernel.adapters.stores.postgres import PostgresStore

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


#: seconds: outlasts any test, so only an explicit release ends a lease
LONG = 600.0

#: who committed the identical commit at the version whose acknowledgement this writer
#: lost (worker-a at epoch 1): the worker id the taker acquires the lease as, or None
#: when it is this writer's own commit that landed
WHO_WROTE_IT = {"this writer": None, "another worker": "worker-b", "this worker id at a later epoch": "worker-a"}


@pytest.mark.parametrize("wrote_it", list(WHO_WROTE_IT))
def test_a_lost_acknowledgement_adopts_the_identical_commit_only_if_this_writer_wrote_it(
    postgres_url: str, wrote_it: str
) -> None:
    """W4 by writer, not by content alone: worker-a's connection drops around its third
    commit. Either its commit landed and only the answer was lost (adopted), or it never
    reached the server and, meanwhile, a taker of the lease committed the very same
    ThreadCommit at that version (a conflict: the row is the taker's, never adopted)."""
    from runkernel.adapters.stores.postgres import PostgresStore

    commits = text_run("t1", "r1", 2)
    taker_id = WHO_WROTE_IT[wrote_it]
    proxy = _proxy(postgres_url, {3: Cut.AFTER_COMMIT if taker_id is None else Cut.BEFORE_SERVER})
    store = PostgresStore(_through(proxy, postgres_url))
    taker_store = PostgresStore(postgres_url)
    lease = store.acquire_lease("r1", "worker-a", LONG)
    store.append(commits[0], lease=lease)
    store.append(commits[1], lease=lease)
    takers: list[Writer] = []

    def the_taker_commits_it_first(_: object) -> None:
        # by construction, before worker-a's commit is sent (and cut before the server):
        # its lease ends (in life it expires while worker-a stalls), the taker acquires a
        # later epoch and commits the identical commit, which replays the same step
        store.before_commit = None
        assert taker_id is not None
        taker_store.release_lease(lease)
        taker = taker_store.acquire_lease("r1", taker_id, LONG)
        taker_store.append(commits[2], lease=taker)
        takers.append(taker.writer)

    if taker_id is not None:
        store.before_commit = the_taker_commits_it_first
    answer: RunSnapshot | CommitConflict
    try:
        answer = store.append(commits[2], lease=lease)
    except CommitConflict as conflict:
        answer = conflict
    stored = list(taker_store.commits("t1"))
    writer = taker_store.writer_of("t1", 3)
    at_three = [c.version for c in stored].count(3)
    print(
        f"lost ack, identical commit by {wrote_it}: cuts {_named(proxy.cut_done)}, adopted {store.adopted_after_lost_ack}, "
        f"conflicts {int(isinstance(answer, CommitConflict))}, rows at version 3: {at_three}, writer {writer}"
    )
    assert stored == commits and at_three == 1  # never written twice, nothing lost
    if taker_id is None:
        assert proxy.cut_done == [(3, Cut.AFTER_COMMIT)]
        assert answer == taker_store.run("r1")
        assert store.adopted_after_lost_ack == 1
        assert writer == lease.writer
    else:
        assert proxy.cut_done == [(3, Cut.BEFORE_SERVER)]
        assert takers == [writer] and writer != lease.writer
        assert isinstance(answer, CommitConflict), "another writer's identical commit was adopted"
        assert store.adopted_after_lost_ack == 0
    store.close()
    taker_store.close()
    proxy.close()


@pytest.mark.parametrize("taker_id", ["worker-b", "worker-a"], ids=["another worker", "same id, later epoch"])
def test_an_identical_commit_landing_between_the_lookup_and_the_resend_is_a_conflict(
    postgres_url: str, taker_id: str
) -> None:
    """The other retry path of W4: worker-a's commit was cut before the server, its
    lookup on the new connection finds nothing, and only then does a taker of the lease
    commit the identical commit; worker-a's resend is judged against it and must name
    the conflict, not adopt the taker's row as its own resend."""
    from runkernel.adapters.stores.postgres import PostgresStore

    class TakerAfterTheLookup(PostgresStore):
        """Runs ``after_empty_lookup`` once, right after a lookup by version found nothing."""

        after_empty_lookup: Callable[[], None] | None = None

        def _stored(self, thread_id: str, version: int) -> tuple[str, Writer | None, int, str] | None:
            found = super()._stored(thread_id, version)
            hook, self.after_empty_lookup = self.after_empty_lookup, None
            if found is None and hook is not None:
                hook()
            return found

    commits = text_run("t1", "r1", 2)
    proxy = _proxy(postgres_url, {3: Cut.BEFORE_SERVER})
    store = TakerAfterTheLookup(_through(proxy, postgres_url))
    taker_store = PostgresStore(postgres_url)
    lease = store.acquire_lease("r1", "worker-a", LONG)
    store.append(commits[0], lease=lease)
    store.append(commits[1], lease=lease)
    takers: list[Writer] = []

    def the_taker_commits_it() -> None:
        taker_store.release_lease(lease)
        taker = taker_store.acquire_lease("r1", taker_id, LONG)
        taker_store.append(commits[2], lease=taker)
        takers.append(taker.writer)

    store.after_empty_lookup = the_taker_commits_it
    with pytest.raises(CommitConflict):
        store.append(commits[2], lease=lease)
    stored = list(taker_store.commits("t1"))
    writer = taker_store.writer_of("t1", 3)
    print(
        f"taker between lookup and resend ({taker_id}): cuts {_named(proxy.cut_done)}, adopted {store.adopted_after_lost_ack}, "
        f"rows at version 3: {[c.version for c in stored].count(3)}, writer {writer}"
    )
    assert proxy.cut_done == [(3, Cut.BEFORE_SERVER)]
    assert takers == [writer] and writer != lease.writer
    assert store.adopted_after_lost_ack == 0
    assert stored == commits
    store.close()
    taker_store.close()
    proxy.close()
