"""The store contract's app versions (``runkernel.adapters.stores.versions``), as pytest
tests ``StoreContract`` inherits: each Run's row keeps the version its activation
recorded, a worker of a version finds only the Runs it may drive, compatibility is an
operator's record kept by the store, and workers register, heartbeat and are forgotten."""

from __future__ import annotations

import pytest

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.versions import may_drive
from runkernel.conformance.runs import text_run


def _running(store: Store, run_id: str, app: str | None, version: str | None) -> None:
    """A Run of ``app`` at ``version``, activated and left Running (it has work)."""
    store.append(text_run(f"t-{run_id}", run_id, 2, app=app, app_version=version)[0])


class VersionsContract:
    """App versions: a mixin of ``StoreContract``."""

    def test_a_runs_row_keeps_the_version_its_activation_recorded(self, store: Store) -> None:
        for commit in text_run("t1", "versioned", 2, app="a", app_version="v1"):
            store.append(commit)
        _running(store, "unversioned", "a", None)
        assert {s.run_id: s.app_version for s in store.list_runs()} == {"versioned": "v1", "unversioned": None}
        # the version is the activation's, on its line of the trace too
        assert [c.app_version for c in store.commits("t1")] == ["v1", None, None]

    def test_a_worker_finds_only_the_runs_its_version_may_drive(self, store: Store) -> None:
        _running(store, "old", "a", "v1")
        _running(store, "new", "a", "v2")
        _running(store, "before-versions", "a", None)
        _running(store, "other-app", "b", "v1")
        assert store.runs_with_work("a", version="v1") == ["old", "before-versions"]
        assert store.runs_with_work("a", version="v2") == ["new", "before-versions"]
        assert store.runs_with_work("a", version="v3") == ["before-versions"]
        assert store.runs_with_work("a") == ["old", "new", "before-versions"]  # no version: every Run
        store.accept_versions("a", "v2", ["v1"])
        assert store.runs_with_work("a", version="v2") == ["old", "new", "before-versions"]
        assert store.runs_with_work("a", version="v1") == ["old", "before-versions"]  # not both ways
        store.accept_versions("b", "v3", ["v1"])  # another app's record opens nothing of this one
        assert store.runs_with_work("a", version="v3") == ["before-versions"]
        assert store.runs_with_work("b", version="v3") == ["other-app"]
        for version in ("v1", "v2", "v3"):
            found = set(store.runs_with_work("a", version=version))
            compatible = store.compatible_versions("a", version)
            rows = {s.run_id: s.app_version for s in store.list_runs(app="a")}
            assert found == {run for run, recorded in rows.items() if may_drive(recorded, version, compatible)}

    def test_accepted_versions_are_kept_once_and_include_the_version_itself(self, store: Store) -> None:
        assert store.compatible_versions("a", "v3") == frozenset({"v3"})
        store.accept_versions("a", "v3", ["v1", "v2"])
        store.accept_versions("a", "v3", ["v2", "v1", "v2"])  # again: nothing changes
        store.accept_versions("a", "v3", [])
        assert store.compatible_versions("a", "v3") == frozenset({"v1", "v2", "v3"})
        assert store.compatible_versions("a", "v2") == frozenset({"v2"})
        assert store.compatible_versions("b", "v3") == frozenset({"v3"})
        with pytest.raises(ValueError):
            store.accept_versions("a", "v4", ["v1", ""])  # refused whole: nothing recorded
        assert store.compatible_versions("a", "v4") == frozenset({"v4"})

    def test_workers_register_heartbeat_and_are_forgotten(self, store: Store) -> None:
        before = store.store_time()
        store.register_worker("w1", "a", "v1")
        store.register_worker("w2", "a", None)
        found = {w.worker_id: w for w in store.workers()}
        assert {(w.app, w.version) for w in found.values()} == {("a", "v1"), ("a", None)}
        now = store.store_time()
        assert all(before - 1 <= w.heartbeat_at <= now + 1 and w.live(now) for w in found.values())
        assert not found["w1"].live(now + 3600)
        assert store.heartbeat_worker("w1") is True
        assert store.workers()[0].heartbeat_at >= found["w1"].heartbeat_at
        store.register_worker("w1", "a", "v2")  # registered again: its new version
        assert [(w.worker_id, w.version) for w in store.workers()] == [("w1", "v2"), ("w2", None)]
        store.forget_worker("w1")
        store.forget_worker("w1")  # nothing left: nothing happens
        assert [w.worker_id for w in store.workers()] == ["w2"]
        assert store.heartbeat_worker("w1") is False
        with pytest.raises(ValueError):
            store.register_worker("", "a", "v1")
