"""W4 on PostgreSQL: a connection cut after the server committed and before its answer
reached the store is retried by identity and version: the commit is adopted, never
written twice and never reported as a conflict; a connection cut before the server saw
the commit sends it again, once; another writer's commit at that version is a conflict,
even when it is this very commit, byte for byte, written under another lease. Also
through a worker with slots, several Runs in flight over as many connections."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable

import attrs
import pytest

from pg_proxy import Cut, CuttingProxy
from postgres_support import postgres_url
from runkernel.adapters.drive.actions import CallRequest, RunCall
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry
from runkernel.adapters.stores.contract import CommitConflict, Writer
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Ended, Message, RunSnapshot
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import step, text_run

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


#: Runs a worker of as many slots drives at once through the cutting proxy
IN_FLIGHT = 4


class _OneCall:
    """Step 1 calls ``work``; step 2 ends the Run."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("working", (CallRequest("work", {}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class _Together:
    """A replay tool whose starts wait until IN_FLIGHT of them run at once (every Run in
    flight together), and are counted."""

    policy = ToolPolicy.replay()

    def __init__(self) -> None:
        self.barrier = threading.Barrier(IN_FLIGHT)
        self.starts: list[str] = []

    def run(self, invocation: RunCall) -> Returned:
        self.starts.append(invocation.operation_id)
        self.barrier.wait(60.0)  # BrokenBarrierError: fewer ran at once (a hang guard, never a figure)
        return Returned({"ok": True})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("a replay tool is never asked its status")


def test_a_worker_with_slots_adopts_every_lost_acknowledgement(postgres_url: str) -> None:
    """W4 with several Runs in flight: a worker of IN_FLIGHT slots (each slot its own
    connection through the proxy) drives IN_FLIGHT Runs at once while every third commit
    across its connections loses its acknowledgement: each is adopted (no conflict, no
    failed drive, no start made twice), every Run ends with a legal trace and no version
    is written twice."""
    from runkernel.adapters.stores.postgres import PostgresStore

    setup = PostgresStore(postgres_url)
    for n in range(IN_FLIGHT):
        decision = step(None, Activate(f"t{n}", f"r{n}", 0, (Message(Role.USER, "go"),), "lost-ack"))
        assert decision.commit is not None
        setup.append(decision.commit)
    commits_per_run = 4  # the call, its Executing commit, its result, the end
    cuts = {n: Cut.AFTER_COMMIT for n in range(3, IN_FLIGHT * commits_per_run + 1, 3)}
    proxy = _proxy(postgres_url, cuts)
    tool = _Together()
    store = PostgresStore(_through(proxy, postgres_url))
    worker = Worker(store, RuntimeApp("lost-ack", _OneCall(), ToolRegistry({"work": tool})), worker_id="w1",
                    concurrency=IN_FLIGHT)
    report = worker.run_once()
    store.close()
    proxy.close()
    legal = ended = duplicated = 0
    for n in range(IN_FLIGHT):
        stored = list(setup.commits(f"t{n}"))
        versions = [c.version for c in stored]
        duplicated += len(versions) - len(set(versions)) + len(set(range(1, len(stored) + 1)) - set(versions))
        legal += check_commits(stored).verdict is Verdict.LEGAL
        snapshot = setup.run(f"r{n}")
        ended += snapshot is not None and isinstance(snapshot.state, Ended)
    setup.close()
    print(
        f"lost-ack, worker with {IN_FLIGHT} slots: Runs {IN_FLIGHT}, in-flight peak {report.in_flight_peak}, "
        f"acknowledgements cut after COMMIT {len(proxy.cut_done)} (planned {len(cuts)}), commits {report.commits}, "
        f"conflicts {report.conflicts}, failed drives {report.failures}, tool starts {len(tool.starts)}, ended "
        f"{ended}, legal {legal}, versions duplicated or missing {duplicated}"
    )
    assert len(proxy.cut_done) == len(cuts) > 1
    assert report.in_flight_peak == IN_FLIGHT
    assert report.conflicts == 0 and report.failures == 0, "a lost acknowledgement was not adopted"
    assert sorted(tool.starts) == sorted(set(tool.starts)) and len(tool.starts) == IN_FLIGHT
    assert ended == legal == IN_FLIGHT and duplicated == 0
