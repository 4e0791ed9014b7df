"""Workers of one app are given the same Runs, oldest first (``worker/listing.py``). A
worker alone walks them in that order; once it meets another worker on a Run (a lease
it could not take), it walks the rest of that pass and the next in an order of its own,
so two workers stop queueing on one Run's lease and leapfrogging each other."""

from __future__ import annotations

from bench import subject
from runkernel import Worker
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.listing import Listing

FOUND = [f"r{n:02}" for n in range(60)]
OLDEST = FOUND[:50]


def test_a_walk_is_the_due_runs_then_the_oldest_batch_not_passed_each_once() -> None:
    walked = list(Listing("w1").walk(["aside"], FOUND, {"r01", "r03"}, 50))
    assert walked == ["aside", *[r for r in FOUND if r not in {"r01", "r03"}][:50]]
    assert not Listing("w1").walk([], [], (), 50)


def test_after_meeting_another_worker_the_rest_and_the_next_pass_go_in_its_own_order() -> None:
    listing = Listing("w1")
    walk = iter(listing.walk([], FOUND, (), 50))
    assert [next(walk), next(walk)] == ["r00", "r01"]
    listing.met_another()  # r01's lease was held
    rest = list(walk)
    assert sorted(rest) == OLDEST[2:] and rest != OLDEST[2:]
    assert list(listing.walk([], FOUND, (), 50)) != OLDEST, "the pass after a meeting is spread too"
    assert list(listing.walk([], FOUND, (), 50)) == OLDEST, "a pass that met nobody: oldest first again"


def test_two_workers_own_orders_differ() -> None:
    orders = []
    for worker_id in ("w1", "w2"):
        listing = Listing(worker_id)
        listing.met_another()
        orders.append(list(listing.walk([], FOUND, (), 50)))
    assert orders[0] != orders[1]


def test_a_worker_refused_a_run_another_worker_leases_walks_on_in_its_own_order() -> None:
    store = MemoryStore()
    run_ids = subject.start_runs(store, "l", 20, "listing-app")
    app = subject.two_call_app("listing-app", lambda: None)
    one, two = Worker(store, app, worker_id="w1"), Worker(store, app, worker_id="w2")
    walk = iter(two._work())  # both polled: the same Runs, oldest first
    assert next(walk) == run_ids[0]
    one.leases.take(run_ids[0])  # w1 was first to the oldest Run
    two.drive(run_ids[0])  # refused: w1 holds it
    assert two.report.contended == 1
    rest = list(walk)
    print(f"w2 walks on with {rest[:3]} ...")
    assert sorted(rest) == sorted(run_ids[1:]) and rest != run_ids[1:]
