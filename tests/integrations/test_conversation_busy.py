"""One exception per situation (issue 35, item 4): a conversation held by a Run that is
not Ended refuses a new Run with ``ConversationBusy`` naming that Run, in both
integrations, whether the holder is found before the start (a Run left waiting) or wins
the race at the same moment (two threads submitting to one conversation: the loser got
``DriverStopped``, ``IntegrationError`` or ``DriverError`` before). Offline, SQLite; the
race's outcomes are printed as counts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from runkernel import check_trace, open_store
from runkernel.errors import ConversationBusy

ROUNDS = 12


def _submitters(framework: str, url: str, record: Path, script: str) -> Callable[[str], Coroutine[Any, Any, Any]]:
    """What one submitter does: start a Run of ``script`` in the conversation it is given
    (its own agent and runner, as another request handler or process would; its Runs
    record an app, so each is leased while it is driven)."""
    if framework == "pydantic_ai":
        pytest.importorskip("pydantic_ai")
        from pydantic_ai_app import build as build_pai

        pai, _ = build_pai(url, record, script, app="race")
        return lambda thread: pai.run("go", conversation_id=thread)
    pytest.importorskip("agents")
    from openai_agents_app import build as build_oa

    oa, runner = build_oa(url, record, script, app="race")
    return lambda thread: runner.run(oa, "go", thread_id=thread)


@pytest.mark.parametrize("framework", ["pydantic_ai", "openai_agents"])
def test_a_conversation_held_by_a_waiting_run_refuses_a_new_one_naming_it(framework: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    submit = _submitters(framework, url, tmp_path / "record.jsonl", "approval")
    asyncio.run(submit("inbox"))  # waits for its approval: not Ended
    store = open_store(url)
    (held,) = store.list_runs()
    with pytest.raises(ConversationBusy) as refused:
        asyncio.run(submit("inbox"))
    print(refused.value)
    assert held.state == "awaiting" and refused.value.run_id == held.run_id and refused.value.thread_id == "inbox"
    assert [s.run_id for s in store.list_runs()] == [held.run_id], "nothing was committed for the refused one"
    store.close()


@pytest.mark.parametrize("framework", ["pydantic_ai", "openai_agents"])
def test_two_submitters_racing_for_one_conversation_the_loser_gets_conversation_busy(
    framework: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    open_store(url).close()
    submitters = [_submitters(framework, url, tmp_path / f"record-{n}.jsonl", "approval") for n in range(2)]
    outcomes: dict[str, list[BaseException | None]] = {}
    for round_ in range(ROUNDS):
        thread_id = f"race-{round_}"
        barrier = threading.Barrier(2)
        results: list[BaseException | None] = []

        def submit(which: int) -> None:
            barrier.wait()
            try:
                asyncio.run(submitters[which](thread_id))
                results.append(None)
            except BaseException as error:  # noqa: BLE001 - every outcome is counted
                results.append(error)

        threads = [threading.Thread(target=submit, args=(n,)) for n in range(2)]
        for each in threads:
            each.start()
        for each in threads:
            each.join(timeout=120)
        outcomes[thread_id] = results
    store = open_store(url)
    held = {s.thread_id: s.run_id for s in store.list_runs()}
    legal = sum(check_trace(store.commits(t)).verdict.name == "LEGAL" for t in held)
    runs_per_thread = {t: len(store.list_runs(thread_id=t)) for t in outcomes}
    store.close()
    kinds: dict[str, int] = {}
    for results in outcomes.values():
        for result in results:
            kinds[type(result).__name__ if result is not None else "started"] = kinds.get(
                type(result).__name__ if result is not None else "started", 0) + 1
    print(f"\n{framework}: {ROUNDS} races of two submitters: {kinds}; {legal} legal traces")
    # the script waits for an approval, so each conversation holds exactly one Run: one winner
    assert kinds == {"started": ROUNDS, "ConversationBusy": ROUNDS}, outcomes
    assert all(n == 1 for n in runs_per_thread.values()) and legal == ROUNDS
    for thread_id, results in outcomes.items():
        (lost,) = [r for r in results if r is not None]
        assert isinstance(lost, ConversationBusy) and lost.run_id == held[thread_id] and lost.thread_id == thread_id
