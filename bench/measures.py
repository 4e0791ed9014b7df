"""How each side of each group is measured (runkernel through ``bench.subject`` only)."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import peers, subject
from bench.counting import TransactionCounter, database_bytes
from bench.framework import Measure, Prepared, Sample, Sizes
from bench.profiles import Work

ROOT = Path(__file__).resolve().parent.parent


def _timed_loop(action: Callable[[], int], seconds: float) -> Sample:
    """Repeat ``action`` (which returns its units of work) for about ``seconds``."""
    units, started = 0, time.perf_counter()
    while True:
        units += action()
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return Sample(elapsed, units)


# --- agent loop -----------------------------------------------------------------------


def agent_loop(mode: str, steps: int) -> Callable[[Sizes, Path], Prepared]:
    """runkernel's Runtime vs LangGraph's prebuilt agent, ``steps`` tool steps per Run.

    ``mode`` is ``memory`` (MemoryStore vs InMemorySaver) or a ``synchronous`` pragma
    (SqliteStore vs SqliteSaver, WAL both, the same pragma both). Each measurement is
    ``repeat`` fresh Runs on fresh stores; store and agent creation are not timed.
    """

    def prepare(sizes: Sizes, scratch: Path) -> Prepared:
        repeat = sizes.agent_repeat[steps]
        serial = itertools.count()

        def runkernel() -> Sample:
            seconds, commits, transactions, grown = 0.0, 0, 0, 0
            for _ in range(repeat):
                number = next(serial)
                if mode == "memory":
                    store = subject.memory_store()
                    started = time.perf_counter()
                    commits += subject.run_agent(store, "agent", steps)
                    seconds += time.perf_counter() - started
                    store.close()
                    continue
                path = scratch / f"rk-{mode}-{steps}-{number}.db"
                with TransactionCounter() as counter:
                    store = subject.sqlite_store(path, mode)
                    empty = database_bytes(path)
                    counter.reset()
                    started = time.perf_counter()
                    commits += subject.run_agent(store, "agent", steps)
                    seconds += time.perf_counter() - started
                    transactions += counter.transactions
                grown += database_bytes(path) - empty
                store.close()
                _remove(path)
            counts = {"commits": float(commits), "transactions": float(transactions), "bytes": float(grown)}
            return Sample(seconds, steps * repeat, counts)

        def langgraph() -> Sample:
            seconds, transactions, grown = 0.0, 0, 0
            for _ in range(repeat):
                number = next(serial)
                if mode == "memory":
                    run = peers.langgraph_agent(peers.langgraph_memory_saver(), steps)
                    started = time.perf_counter()
                    run("agent")
                    seconds += time.perf_counter() - started
                    continue
                path = scratch / f"lg-{mode}-{steps}-{number}.db"
                with TransactionCounter() as counter:
                    saver, connection = peers.langgraph_sqlite_saver(path, mode)
                    counter.watch(connection)
                    run = peers.langgraph_agent(saver, steps)
                    empty = database_bytes(path)
                    counter.reset()
                    started = time.perf_counter()
                    run("agent")
                    seconds += time.perf_counter() - started
                    transactions += counter.transactions
                grown += database_bytes(path) - empty
                connection.close()
                _remove(path)
            counts = {"transactions": float(transactions), "bytes": float(grown)}
            return Sample(seconds, steps * repeat, counts)

        return Prepared({"runkernel": runkernel, "langgraph": langgraph})

    return prepare


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# --- one store commit vs a raw commit -----------------------------------------------------


def store_commit(synchronous: str) -> Callable[[Sizes, Path], Prepared]:
    """``SqliteStore.append`` vs a bare INSERT+COMMIT of the same line, same pragmas.

    Each round appends the next ``commits_per_round`` commits of a tool-step Run (a new
    Thread per round, so history does not grow across rounds).
    """

    def prepare(sizes: Sizes, scratch: Path) -> Prepared:
        count = sizes.commits_per_round
        store = subject.sqlite_store(scratch / f"commit-{synchronous}.db", synchronous)
        raw = peers.RawSqlite(scratch / f"raw-{synchronous}.db", synchronous)
        rounds = itertools.count()
        pending: list[list[str]] = []  # the lines runkernel wrote this round, for the raw side

        def runkernel() -> Sample:
            commits = list(itertools.islice(subject.history_commits(f"c{next(rounds)}", tool_steps=True), count))
            lines = [subject.encode_commit(commit) for commit in commits]
            pending.append(lines)
            started = time.perf_counter()
            for commit in commits:
                subject.append(store, commit)
            return Sample(time.perf_counter() - started, count)

        def limit() -> Sample:
            lines = pending.pop() if pending else []
            started = time.perf_counter()
            for line in lines:
                raw.commit(line)
            return Sample(time.perf_counter() - started, max(len(lines), 1))

        return Prepared(
            {"runkernel": runkernel, "raw": limit},
            profiles={"runkernel": appends_to_profile(store, "profiled", count)},
        )

    return prepare


PROFILED_APPENDS = 4_000
"""Commits made ahead for a store's profile (``appends_to_profile``)."""


def appends_to_profile(store: Any, thread_id: str, per_call: int) -> Work:
    """One unit of a store side's work for its profile: append the next ``per_call`` of
    commits made ahead, so the profile holds the appends and not ``decide``."""
    made = iter(list(itertools.islice(subject.history_commits(thread_id, tool_steps=True), PROFILED_APPENDS)))

    def append_next() -> None:
        for commit in itertools.islice(made, per_call):
            subject.append(store, commit)

    return Work(append_next, most=PROFILED_APPENDS // per_call - 1)


# --- simulate ------------------------------------------------------------------------


def simulate_sqlite(sizes: Sizes, scratch: Path) -> Prepared:
    """``runkernel simulate`` on SQLite FULL, and raw FULL commits right after it."""
    serial = itertools.count()

    def runkernel() -> Sample:
        path = scratch / f"simulate-{next(serial)}.db"
        with TransactionCounter() as counter:
            store = subject.sqlite_store(path, "FULL")
            counter.reset()
            started = time.perf_counter()
            commits = subject.simulate(store, sizes.simulate_runs, 1)
            seconds = time.perf_counter() - started
            transactions = counter.transactions
        store.close()
        _remove(path)
        return Sample(seconds, commits, {"transactions": float(transactions), "commits": float(commits)})

    def limit() -> Sample:
        path = scratch / f"simulate-raw-{next(serial)}.db"
        raw = peers.RawSqlite(path, "FULL")
        line = "x" * 600
        count = max(sizes.commits_per_round, 20)
        started = time.perf_counter()
        for _ in range(count):
            raw.commit(line)
        seconds = time.perf_counter() - started
        raw.close()
        _remove(path)
        return Sample(seconds, count)

    return Prepared({"runkernel": runkernel, "raw": limit})


# --- kernel ------------------------------------------------------------------------


def kernel_decide(sizes: Sizes, scratch: Path) -> Prepared:
    """``decide`` (alone, and with the store's validation) vs python-statemachine's ``send``."""
    state, events = subject.one_call_events()
    machine_class, sends = subject.spec_machine_edges()
    seconds = sizes.micro_seconds

    def decide_alone() -> Sample:
        def once() -> int:
            subject.decide_events(state, events)
            return len(events)

        return _timed_loop(once, seconds)

    def decide_validated() -> Sample:
        def once() -> int:
            subject.decide_and_validate_events(state, events)
            return len(events)

        return _timed_loop(once, seconds)

    def statemachine() -> Sample:
        units, elapsed = 0, 0.0
        while elapsed < seconds:
            machines = [machine_class() for _ in range(50)]  # construction is not timed
            started = time.perf_counter()
            for machine in machines:
                for event in sends:
                    machine.send(event)
            elapsed += time.perf_counter() - started
            units += len(machines) * len(sends)
        return Sample(elapsed, units)

    return Prepared(
        {"decide": decide_alone, "decide+validate": decide_validated, "statemachine": statemachine},
        profiles={
            "decide": Work(lambda: subject.decide_events(state, events)),
            "decide+validate": Work(lambda: subject.decide_and_validate_events(state, events)),
        },
    )


# --- codec ---------------------------------------------------------------------------


def codec(sizes: Sizes, scratch: Path) -> Prepared:
    """runkernel's commit encode/decode vs the bare libraries on the same data.

    The data are the commits of a real 3-step agent Run. Encoding's baseline is
    ``orjson.dumps`` of the commit's plain dict; decoding's is ``msgspec.json.decode``
    of the same line (untyped: it builds dicts and validates nothing, so it is the
    stricter baseline for runkernel's typed, validated decode).
    """
    commits = subject.sample_commits(3)
    dicts = [subject.commit_as_dict(commit) for commit in commits]
    lines = [subject.encode_commit(commit) for commit in commits]
    encoded = [line.encode("utf-8") for line in lines]
    seconds = sizes.micro_seconds

    def encode() -> Sample:
        def once() -> int:
            for commit in commits:
                subject.encode_commit(commit)
            return len(commits)

        return _timed_loop(once, seconds)

    def decode() -> Sample:
        def once() -> int:
            for line in lines:
                subject.decode_commit(line)
            return len(lines)

        return _timed_loop(once, seconds)

    def bare_encode() -> Sample:
        dumps = peers.orjson_module().dumps

        def once() -> int:
            for value in dicts:
                dumps(value)
            return len(dicts)

        return _timed_loop(once, seconds)

    def bare_decode() -> Sample:
        loads = peers.msgspec_json().decode

        def once() -> int:
            for raw in encoded:
                loads(raw)
            return len(encoded)

        return _timed_loop(once, seconds)

    notes = {"bytes": f"{sum(map(len, encoded)) / len(encoded):,.0f} B per commit on average ({len(encoded)} commits)"}
    return Prepared(
        {"encode": encode, "orjson encode": bare_encode, "decode": decode, "msgspec decode": bare_decode},
        notes,
        profiles={
            "encode": Work(lambda: [subject.encode_commit(commit) for commit in commits]),
            "decode": Work(lambda: [subject.decode_commit(line) for line in lines]),
        },
    )


# --- latest state + recover over a long history -------------------------------------------------


def history(sizes: Sizes, scratch: Path) -> Prepared:
    """Read the latest state and plan recovery on a long Run vs a 10-commit one.

    The long Runs are built by ``decide`` and appended through the store (SQLite,
    NORMAL) until ``history_target`` commits or ``history_budget`` seconds per Run,
    whichever comes first; the row's note says how far it got.
    """
    store = subject.sqlite_store(scratch / "history.db", "NORMAL")
    notes: dict[str, str] = {}
    for kind, tool_steps in (("text", False), ("tool", True)):
        for commit in itertools.islice(subject.history_commits(f"{kind}-short", tool_steps=tool_steps), 10):
            subject.append(store, commit)
        started, made = time.perf_counter(), 0
        per_commit: list[float] = []
        for commit in subject.history_commits(f"{kind}-long", tool_steps=tool_steps):
            began = time.perf_counter()
            subject.append(store, commit)
            if made % 1000 == 0:
                per_commit.append(time.perf_counter() - began)
            made += 1
            if made >= sizes.history_target or time.perf_counter() - started > sizes.history_budget:
                break
        stopped = "" if made >= sizes.history_target else f" (stopped by the {sizes.history_budget:.0f} s build budget)"
        notes[kind] = (
            f"long Run: {made:,} commits of target {sizes.history_target:,}{stopped}; built in "
            f"{time.perf_counter() - started:.1f} s, last sampled append {per_commit[-1] * 1e3:.2f} ms"
        )
    seconds = sizes.micro_seconds

    def reader(thread_id: str) -> Measure:
        run_id = subject.run_id_of(thread_id)

        def measure() -> Sample:
            def once() -> int:
                subject.latest_and_recover(store, run_id)
                return 1

            return _timed_loop(once, seconds)

        return measure

    return Prepared(
        {
            "text long": reader("text-long"),
            "text short": reader("text-short"),
            "tool long": reader("tool-long"),
            "tool short": reader("tool-short"),
        },
        notes,
    )


# --- check-trace ---------------------------------------------------------------------


def check_trace(sizes: Sizes, scratch: Path) -> Prepared:
    """``check-trace`` on exported simulate traces vs a strict ``json.loads`` loop."""
    store = subject.memory_store()
    subject.simulate(store, sizes.trace_runs, 1)
    path = scratch / "trace.jsonl"
    lines = subject.export_trace(store, path)
    size = path.stat().st_size

    def checker() -> Sample:
        started = time.perf_counter()
        legal = subject.check_trace(path)
        seconds = time.perf_counter() - started
        if not legal:
            raise AssertionError("check-trace found the exported simulate trace illegal")
        return Sample(seconds, lines)

    def loads_loop() -> Sample:
        started = time.perf_counter()
        with path.open("rb") as stream:
            for raw in stream:
                peers.strict_json_loads(raw)
        return Sample(time.perf_counter() - started, lines)

    def peak() -> Sample:
        tracemalloc.start()
        try:
            started = time.perf_counter()
            subject.check_trace(path)
            seconds = time.perf_counter() - started
            _, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return Sample(seconds, lines, {"peak": float(top), "file": float(size)})

    notes = {"file": f"{lines:,} lines, {size / 1e6:.1f} MB, from `simulate --runs {sizes.trace_runs}`"}
    return Prepared(
        {"check-trace": checker, "json.loads": loads_loop, "peak": peak},
        notes,
        first_round_only=frozenset({"peak"}),
        profiles={"check-trace": Work(lambda: subject.check_trace(path))},
    )


# --- verification throughput, for the record ------------------------------------------------


def model_checker(sizes: Sizes, scratch: Path) -> Prepared:
    """``proofs/model_check.py --profile ci`` capped at ``model_states`` states."""

    def measure() -> Sample:
        argv = [sys.executable, "proofs/model_check.py", "--profile", "ci", "--max-states", str(sizes.model_states)]
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        found = re.search(r"states explored:\s*([\d,]+)", done.stdout)
        took = re.search(r"seconds:\s*([\d.]+)", done.stdout)
        if found is None or took is None:
            raise RuntimeError(f"model checker printed no figures (exit {done.returncode}): {done.stderr[-300:]}")
        # its own figure (search time, one decimal) unless too short to read; else wall time
        seconds = float(took.group(1)) if float(took.group(1)) >= 1 else wall
        return Sample(seconds, int(found.group(1).replace(",", "")))

    return Prepared({"model checker": measure})


def stateful_test(sizes: Sizes, scratch: Path) -> Prepared:
    """The stateful runtime test's machine (memory store), steps counted by an invariant."""

    def measure() -> Sample:
        argv = [sys.executable, "-m", "bench.stateful_rate", str(sizes.stateful_examples)]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"stateful run failed (exit {done.returncode}): {done.stderr[-300:]}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return Sample(float(figures["seconds"]), int(figures["steps"]))

    return Prepared({"stateful test": measure})


# --- the CLI's start ------------------------------------------------------------------------


def cli_start(sizes: Sizes, scratch: Path) -> Prepared:
    """CPU seconds of ``runkernel --version`` in a fresh interpreter vs ``python -c pass``:
    what the CLI costs before it does anything (CPU, not wall time: a loaded machine
    delays a process more than it makes it work more)."""
    import resource

    def child_cpu(argv: list[str]) -> Measure:
        def measure() -> Sample:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            seconds = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            return Sample(seconds, 1, {"cpu": cpu})

        return measure

    sides = {
        "runkernel --version": child_cpu([sys.executable, "-m", "runkernel.cli", "--version"]),
        "python -c pass": child_cpu([sys.executable, "-c", "pass"]),
    }
    return Prepared(sides, {})
