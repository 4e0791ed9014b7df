"""RESULTS.md: the environment, the method, and one table row per measure."""

from __future__ import annotations

import datetime
import os
import platform
import sqlite3
from collections.abc import Mapping

from bench.framework import Row, SideResult, Sizes, median, values
from bench.peers import PEER_PACKAGES, version
from bench.profiles import profile_key

NOT_RUN = SideResult([], missing="not run")


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return "unknown memory"
    return f"{pages * size / 2**30:.0f} GiB RAM"


def _side(results: Mapping[str, Mapping[str, SideResult]], group: str, side: str) -> SideResult:
    found = results.get(group)
    if found is None:
        return NOT_RUN
    return found.get(side, NOT_RUN)


def _cell(result: SideResult, show: object) -> str:
    if result.missing:
        return "peer not installed" if "not installed" in result.missing else result.missing
    if result.error:
        return f"error: {result.error}"
    if not result.samples or not callable(show):
        return "—"
    best = min(result.samples, key=lambda sample: sample.per_unit)
    text = str(show(best))
    return text if len(result.samples) == 1 else f"{text} (best of {len(result.samples)})"


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def _group_failure(results: Mapping[str, Mapping[str, SideResult]], notes: Mapping[str, Mapping[str, str]], group: str) -> SideResult | None:
    found = notes.get(group, {})
    if "missing" in found:
        return SideResult([], missing=found["missing"])
    if "error" in found:
        return SideResult([], error=found["error"])
    return None


def table_line(row: Row, results: Mapping[str, Mapping[str, SideResult]], notes: Mapping[str, Mapping[str, str]]) -> tuple[str, bool | None]:
    """One Markdown table line, and whether the row met its goal (None: no verdict)."""
    a = _group_failure(results, notes, row.a.group) or _side(results, row.a.group, row.a.side)
    b = None
    if row.b is not None:
        b = _group_failure(results, notes, row.b.group) or _side(results, row.b.group, row.b.side)
    ours = _cell(a, row.show_a)
    theirs = "—" if b is None else _cell(b, row.show_b)
    found = values(row, a, b) if a.samples and (b is None or b.samples) else []
    goal_text = row.goal.text if row.goal is not None else "for the record"
    if not found:
        reason = next((r.missing or r.error for r in (a, b) if r is not None and (r.missing or r.error)), "no samples")
        verdict_text = "peer not installed" if reason and "not installed" in reason else "not measured"
        return f"| {row.name} | {ours} | {theirs} | — | — | {goal_text} | {verdict_text} |", None
    middle = median(found)
    verdict: bool | None = None
    verdict_text = "record"
    if row.goal is not None:
        verdict = row.goal.met(middle, a.samples, b.samples if b is not None else [])
        limit = row.goal.limit(a.samples, b.samples if b is not None else [])
        if callable(row.goal.threshold):
            goal_text = f"{goal_text} = {row.goal.op.replace('>=', '≥').replace('<=', '≤')} {_number(limit)}"
        verdict_text = "**pass**" if verdict else "**FAIL**"
    ratio_min = f"{_number(min(found))} {row.value_text}"
    ratio_median = f"{_number(middle)} {row.value_text}"
    return f"| {row.name} | {ours} | {theirs} | {ratio_min} | {ratio_median} | {goal_text} | {verdict_text} |", verdict


def render(
    table: list[Row],
    results: Mapping[str, Mapping[str, SideResult]],
    notes: Mapping[str, Mapping[str, str]],
    *,
    sizes: Sizes,
    fsync: str,
    seconds: float,
    load: tuple[tuple[float, float, float], tuple[float, float, float]],
    argv: list[str],
) -> str:
    """The whole RESULTS.md."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    peers = ", ".join(f"{name} {version(name)}" for name in PEER_PACKAGES)
    lines = [
        "# runkernel benchmark results",
        "",
        f"Written by `{' '.join(argv)}` on {now}, in {seconds:.0f} s"
        + (" — **`--quick`: tiny sizes, the figures mean nothing**." if sizes.quick else "."),
        "",
        f"- machine: {_cpu()}, {os.cpu_count()} cores, {_memory()}, {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), SQLite {sqlite3.sqlite_version}",
        f"- peers: {peers}",
        f"- raw fsync rate during the run (512-byte write + fsync, sampled after every round): {fsync}",
        f"- load average (1/5/15 min) at start {load[0][0]:.2f}/{load[0][1]:.2f}/{load[0][2]:.2f}, "
        f"at end {load[1][0]:.2f}/{load[1][1]:.2f}/{load[1][2]:.2f}: the 2 cores are shared with other "
        "work, so absolute times are noisy; only ratios taken in the same rounds mean anything",
        "",
        "## Method",
        "",
        "- Each group's sides run interleaved, A, B, A, B, …, for several rounds; a row's ratio is"
        " computed per round and reported as min and median; **pass/fail is judged on the median**.",
        "  The runkernel and peer columns show each side's best round.",
        "- Agent loop: runkernel's reference `Runtime` and LangGraph's prebuilt agent"
        " (`langchain.agents.create_agent`) with the same scripted model (one `lookup` call per step,"
        " then a final answer, counting its own calls) and the same tool; LangGraph runs with"
        " `durability=\"sync\"`, on `SqliteSaver` over a connection with the same pragmas (WAL and the"
        " same `synchronous`) or on `InMemorySaver`. Fresh store per Run; creating stores and agents is not timed.",
        "- Durable transactions are counted on the sqlite3 connections: a trace callback on every"
        " connection opened during the measurement counts each transaction that changed a row (a"
        " COMMIT after which `total_changes` is higher than at its BEGIN, or an autocommit"
        " INSERT/UPDATE/DELETE/REPLACE that changed one; a DELETE that matched nothing writes no WAL"
        " frame and is not counted). With WAL and `synchronous=FULL` each counted one is one fsync of"
        " the WAL (checked once with `strace -f -e trace=fsync,fdatasync` on 20-step Runs at FULL: 62"
        " counted vs 64 fsync calls for runkernel, 85 vs 87 for LangGraph; the 2 extra fall after the"
        " counted window, most likely the WAL checkpoint when the file is closed).",
        "- Disk bytes: `page_count × page_size` as a reader sees it (pages still in the WAL included),"
        " after the Run minus before it.",
        "- runkernel is reached only through `bench/subject.py` (see its docstring); it runs as it"
        " ships on this branch, on the production path: `decide` and `recover` with their"
        " self-check off (the default; the tests, the simulator and the model checker turn it on),"
        " so each commit is judged once, by the store.",
        "- A row that misses its goal shows, under \"Rows that miss their goal\", where runkernel's"
        " time went on its side in this run: cProfile's own time over about a second of the side's"
        " work after the timed rounds (`bench/profiles.py`), by area and by function. cProfile"
        " charges every Python call a fixed cost, so the shares compare the parts of one side; the"
        " table's rates are timed without it.",
        "- Throughput under latency (`bench/latency.py`): N Runs of two model calls and one tool call,"
        f" each sleeping {sizes.latency_sleep:g} s, drained by ONE process: `runkernel worker` with its default"
        " slots, beside one DBOS process working a queue whose `worker_concurrency` is the same number (the"
        " rows' names say it), both polling every 0.05 s; every round also drains one Run alone, the"
        " yardstick of the overlap and goal rows. Loop lag (`bench/loop_lag.py`): the lateness of a 10 ms"
        " `asyncio.sleep` repeated on the loop while `AsyncDriver` drives N such Runs on it.",
        "- Parallel tool calls (`bench/group_calls.py`): the tool phase of one Run whose model asks for"
        f" three tools of {sizes.latency_sleep:g} s in one reply (from the model's reply to its next call:"
        " the group's commits, the tools, the publication), beside the same Run with one such tool, under"
        " the `Runtime` and the Pydantic AI integration, on SQLite (synchronous=FULL).",
        f"- Time budget: after {sizes.budget:.0f} s a group runs no round beyond its first (the agent"
        " loops run last, longest last); a cut is listed under the group's notes.",
        "",
        "## Results",
        "",
        "| measure | runkernel | peer / limit | ratio min | ratio median | goal | result |",
        "|---|---|---|---|---|---|---|",
    ]
    failing: list[Row] = []
    for row in table:
        line, verdict = table_line(row, results, notes)
        lines.append(line)
        if verdict is False:
            failing.append(row)
    group_notes = [
        f"- {group} ({key}): {text}"
        for group, found in notes.items()
        for key, text in found.items()
        if key != "missing" and not key.startswith(profile_key(""))
    ]
    if group_notes:
        lines += ["", "## Notes from the groups", "", *group_notes]
    lines += ["", "## Rows that miss their goal", ""]
    if not failing:
        lines.append("None.")
    for row in failing:
        lines.append(f"- {row.name}" + (f": {row.limit}" if row.limit else ""))
        measured = notes.get(row.a.group, {}).get(profile_key(row.a.side))
        if measured is not None:
            lines.append(f"  - where runkernel's time went (cProfile of its side, own time, in this run): {measured}")
    lines.append("")
    return "\n".join(lines)
