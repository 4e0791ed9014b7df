"""Explicit-state bounded model checker of the pure runkernel kernel.

Breadth-first search over every interleaving of kernel decisions, model replies, gate
verdicts, tool outcomes, status answers, operator commands and crashes, for a bounded
configuration (``--profile ci|deep``, see ``mc_config.py``). The store is the last
committed RunSnapshot; the runtime is the queue of effects still to carry out from the
current Decision (``mc_model.py``). In every reachable state it checks that each commit
is accepted by ``validate_commit``, I5, I6, I8, I9, I11, I13, I14, the pairing of
tool-use calls with tool results, that no non-final state is a dead end, and (after the
search) that a final state stays reachable from every state.

    python proofs/model_check.py [--profile ci|deep] [--max-states N] [--counterexample FILE]
        [--time-limit SECONDS] [--memory-limit MIB] [--json FILE] [--memo | --plain]

The search reports its frontier per depth as it goes (stderr). Speedups that keep the
verdict: the kernel memo (``KernelMemo``, on in the deep profile or with ``--memo``;
``--plain`` turns it off), ``decide``'s self-check only where the model's own judging
of its commits does not imply it (``Profile.kernel_self_check``; ``--plain`` runs it on
every answer), a frontier of live objects that share their snapshots
(``Profile.pickle_frontier`` off), and no cyclic garbage collection during the search.

Exit 0: every invariant holds in every reachable state and the search was exhaustive.
Exit 1: a violation; the shortest counterexample is printed (and written to FILE as a
``runkernel/2`` trace). Exit 2: the state cap was hit, so nothing was proved.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import pickle
import sys
import time
from array import array
from collections.abc import Callable

from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.policies import IndeterminateChoice
from runkernel.kernel.state import ThreadCommit

from mc_config import PROFILES, Profile
from mc_encode import Key
from mc_kernel import CRASH, INTERRUPT, Context, Kernel, KernelMemo, State, Violation
from mc_model import expand
from mc_result import Counterexample, Level, Result, peak_memory_mib, summary

__all__ = ["Counterexample", "Level", "Result", "check", "main", "plain", "summary"]

PROGRESS_EVERY = 100_000


class _Search:
    def __init__(
        self,
        ctx: Context,
        max_states: int,
        progress: Callable[[str], None] | None,
        time_limit: float | None = None,
        memory_limit: float | None = None,
    ) -> None:
        self.ctx = ctx
        self.memory_limit = memory_limit
        self.max_states = max_states
        self.progress = progress
        self.time_limit = time_limit
        self.stopped = ""
        self.levels: list[Level] = []
        self.root = State(None)
        self.compact = ctx.profile.hash_compaction
        self.pickled = ctx.profile.pickle_frontier
        self.index: dict[Key, int] = {self._key(self.root): 0}
        self.parent = array("q", [-1])
        self.label_of = array("q", [-1])
        self.labels: list[str] = []
        self.label_ids: dict[str, int] = {}
        self.src = array("q")
        self.dst = array("q")
        self.finals: list[int] = []
        self.transitions = 0
        self.depth = 0
        self.crash_points: dict[str, int] = {}
        self.started = time.perf_counter()

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started

    def _level(self, frontier: int) -> None:
        level = Level(self.depth, frontier, len(self.index), self.transitions, self._elapsed())
        self.levels.append(level)
        if self.progress is not None:
            self.progress(
                f"[model-check] depth {level.depth}: frontier {level.frontier:,}, {level.states:,} states, "
                f"{level.transitions:,} transitions, {level.seconds:.0f} s, peak {peak_memory_mib():,.0f} MiB"
            )

    def _key(self, state: State) -> Key:
        key = state.key()
        return hash(key) if self.compact else key

    def _label_id(self, label: str) -> int:
        found = self.label_ids.get(label)
        if found is None:
            found = self.label_ids[label] = len(self.labels)
            self.labels.append(label)
        return found

    def run(self) -> tuple[str, Counterexample | None]:
        frontier: list[tuple[int, State | bytes, Key]] = [(0, self.root, self._key(self.root))]
        live = self.ctx.profile.check_liveness
        self._level(len(frontier))
        while frontier:
            upcoming: list[tuple[int, State | bytes, Key]] = []
            for idx, stored, key in frontier:
                if idx % 1024 == 0:
                    if self.time_limit is not None and self._elapsed() > self.time_limit:
                        self.stopped = f"the time limit ({self.time_limit:.0f} s)"
                        return "capped", None
                    if self.memory_limit is not None and peak_memory_mib() > self.memory_limit:
                        self.stopped = f"the memory limit ({self.memory_limit:,.0f} MiB)"
                        return "capped", None
                state = stored if isinstance(stored, State) else pickle.loads(stored)
                try:
                    moves = expand(self.ctx, state)
                except Violation as violation:
                    return "violation", self.counterexample(idx, violation)
                progress = False
                for move in moves:
                    self.transitions += 1
                    if move.crash is not None:
                        self.crash_points[move.crash] = self.crash_points.get(move.crash, 0) + 1
                    target_key = self._key(move.target)
                    # a crash or an operator's cancel is not the run making progress
                    if not progress and move.actor not in (INTERRUPT, CRASH) and target_key != key:
                        progress = True
                    target = self.index.get(target_key)
                    if target is None:
                        if len(self.index) >= self.max_states:
                            self.stopped = f"the state cap ({self.max_states:,})"
                            return "capped", None
                        target = len(self.index)
                        self.index[target_key] = target
                        self.parent.append(idx)
                        self.label_of.append(self._label_id(move.label))
                        # a pickled frontier takes about a third of the memory of live
                        # objects, and about a third of the time of the search
                        kept = pickle.dumps(move.target, protocol=5) if self.pickled else move.target
                        upcoming.append((target, kept, target_key))
                        if self.progress is not None and target % PROGRESS_EVERY == 0:
                            self.progress(
                                f"[model-check] {target:,} states, {self.transitions:,} transitions, depth "
                                f"{self.depth + 1}, {time.perf_counter() - self.started:.0f} s"
                            )
                    if live:
                        self.src.append(idx)
                        self.dst.append(target)
                if state.final:
                    self.finals.append(idx)
                elif not progress:
                    dead = Violation("no dead ends", f"a non-final state has no successor but itself: {_describe(state)}")
                    return "violation", self.counterexample(idx, dead)
            if upcoming:
                self.depth += 1
                self._level(len(upcoming))
            frontier = upcoming
        if live:
            stuck = self._cannot_finish()
            if stuck is not None:
                livelock = Violation("liveness", "no final (Ended, nothing in flight) state is reachable from here")
                return "violation", self.counterexample(stuck, livelock)
        return "ok", None

    def _cannot_finish(self) -> int | None:
        """The first state (in BFS order, so a shallowest one) that can never reach a final state."""
        count = len(self.index)
        starts = array("q", bytes(8 * (count + 1)))
        for d in self.dst:
            starts[d + 1] += 1
        for i in range(count):
            starts[i + 1] += starts[i]
        fill = array("q", starts)
        preds = array("q", bytes(8 * len(self.src)))
        for s, d in zip(self.src, self.dst):
            preds[fill[d]] = s
            fill[d] += 1
        good = bytearray(count)
        stack = list(self.finals)
        for f in stack:
            good[f] = 1
        while stack:
            node = stack.pop()
            for k in range(starts[node], starts[node + 1]):
                p = preds[k]
                if not good[p]:
                    good[p] = 1
                    stack.append(p)
        bad = good.find(0)
        return None if bad < 0 else bad

    def path(self, idx: int) -> list[str]:
        labels: list[str] = []
        while idx > 0:
            labels.append(self.labels[self.label_of[idx]])
            idx = self.parent[idx]
        return labels[::-1]

    def counterexample(self, idx: int, violation: Violation) -> Counterexample:
        """Replay the shortest path to ``idx`` to recover the committed log along it."""
        choices = self.path(idx)
        commits: list[ThreadCommit] = []
        state = self.root
        for label in choices:
            move = next(m for m in expand(self.ctx, state) if m.label == label)
            commits.extend(move.commits)
            state = move.target
        commits.extend(violation.written)
        offending = violation.commit is not None and violation.commit not in commits
        if violation.commit is not None and offending:
            commits.append(violation.commit)
        failing = violation.label or (f"(expanding {_describe(state)})")
        return Counterexample(
            violation.invariant,
            violation.message,
            choices + [failing],
            [commit_to_json(c) for c in commits],
            offending,
        )


def _describe(state: State) -> str:
    snap = state.snap
    run = "no commit" if snap is None else f"{type(snap.state).__name__} v{snap.version} step {snap.step}"
    head = type(state.queue[0]).__name__ if state.queue else ("recovering" if state.recovering else "quiet")
    return f"{run}, next: {head}"


def check(
    profile: Profile | str = "ci",
    *,
    max_states: int | None = None,
    kernel: Kernel | None = None,
    progress: Callable[[str], None] | None = None,
    time_limit: float | None = None,
    memory_limit: float | None = None,
) -> Result:
    """Run the search for ``profile`` and return what it found (``capped`` past
    ``max_states`` states, ``time_limit`` seconds or ``memory_limit`` MiB of peak memory)."""
    chosen = PROFILES[profile] if isinstance(profile, str) else profile
    used = kernel or Kernel()
    memo = KernelMemo(used) if chosen.memo_kernel else None
    ctx = Context(chosen, chosen.policies(), used, memo=memo)
    search = _Search(ctx, max_states or chosen.max_states, progress, time_limit, memory_limit)
    # the search builds no reference cycles worth collecting, and the collector's passes
    # over millions of live states cost a fifth of the time
    collecting = gc.isenabled()
    gc.disable()
    try:
        verdict, counterexample = search.run()
    finally:
        if collecting:
            gc.enable()
    return Result(
        profile=chosen.name,
        verdict=verdict,
        states=len(search.index),
        transitions=search.transitions,
        max_depth=search.depth,
        seconds=time.perf_counter() - search.started,
        final_states=len(search.finals),
        crash_points=dict(sorted(search.crash_points.items())),
        counterexample=counterexample,
        counters=dict(ctx.counters) | ({"kernel answers from the memo": memo.hits} if memo else {}),
        levels=search.levels,
        stopped=search.stopped,
        peak_mib=peak_memory_mib(),
        hash_compaction=chosen.hash_compaction,
    )


def plain(profile: Profile) -> Profile:
    """``profile`` with every speedup and reduction switched off (the reference search)."""
    return dataclasses.replace(profile, memo_kernel=False, kernel_self_check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    parser.add_argument("--max-states", type=int, default=None, help="state cap (default: the profile's)")
    parser.add_argument("--counterexample", metavar="FILE", help="write a counterexample's runkernel/2 trace here")
    parser.add_argument("--end-on-indeterminate", action="store_true", help="the host ends the run on Indeterminate")
    parser.add_argument("--no-liveness", action="store_true", help="skip the final-state reachability check")
    parser.add_argument("--json", metavar="FILE", help="also write the result (levels included) as JSON here")
    parser.add_argument("--memory-limit", type=float, default=None, metavar="MIB", help="stop (capped) past this peak")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS", help="stop (capped) after this")
    parser.add_argument("--memo", action="store_true", help="memoize the kernel's answers (as the deep profile does)")
    parser.add_argument(
        "--plain", action="store_true",
        help="no kernel memo, decide's self-check on every answer (to compare verdicts with the speedups)",
    )
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    profile = dataclasses.replace(
        profile,
        on_indeterminate=IndeterminateChoice.END_RUN if args.end_on_indeterminate else profile.on_indeterminate,
        check_liveness=profile.check_liveness and not args.no_liveness,
    )
    if args.memo:
        profile = dataclasses.replace(profile, memo_kernel=True)
    if args.plain:
        profile = plain(profile)
    result = check(
        profile,
        max_states=args.max_states,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
        time_limit=args.time_limit,
        memory_limit=args.memory_limit,
    )
    print(summary(result, profile))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(dataclasses.asdict(result), out, indent=1)
    if result.counterexample is not None and args.counterexample:
        with open(args.counterexample, "w", encoding="utf-8") as out:
            for line in result.counterexample.trace:
                out.write(json.dumps(line, sort_keys=True) + "\n")
        print(f"counterexample trace written to {args.counterexample}")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
