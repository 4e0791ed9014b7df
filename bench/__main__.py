"""``python -m bench``: measure runkernel against its peers and limits, write RESULTS.md.

    python -m bench [--quick] [--out PATH] [--only GROUP ...]

Every group's sides run interleaved (A, B, A, B, ...) for several rounds; each row
reports runkernel's figure, the peer's or limit's, the ratio's min and median over the
rounds, the goal and pass/fail (judged on the median). ``--quick`` runs tiny sizes and
one or two rounds, to check the benchmark itself; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import figures
from bench.counting import FsyncProbe
from bench.framework import FULL, QUICK, Group, SideResult, Sizes
from bench.peers import PeerMissing
from bench.profiles import profile, profile_key
from bench.report import render
from bench.rows import groups, rows

DEFAULT_OUT = Path(__file__).resolve().parent / "RESULTS.md"


def run_group(
    group: Group, sizes: Sizes, scratch: Path, probe: FsyncProbe, deadline: float
) -> tuple[dict[str, SideResult], dict[str, str]]:
    """Prepare a group and run its sides in interleaved rounds.

    A round after the first starts only if it would end, at the last round's pace,
    before ``deadline`` (``time.monotonic()``); the group's notes say when rounds were cut.
    """
    try:
        prepared = group.prepare(sizes, scratch)
    except PeerMissing as missing:
        return {}, {"missing": str(missing)}
    except Exception as error:  # noqa: BLE001 - a broken group must not stop the others
        traceback.print_exc()
        return {}, {"error": f"{type(error).__name__}: {error}"}
    results = {name: SideResult([]) for name in prepared.sides}
    planned = group.rounds(sizes)
    last_round = 0.0
    for round_number in range(planned):
        if round_number and time.monotonic() + last_round > deadline:
            prepared.notes["rounds"] = f"{round_number} of {planned} rounds: the rest would pass the time budget"
            break
        began = time.monotonic()
        for name, measure in prepared.sides.items():
            side = results[name]
            if side.missing or side.error or (round_number and name in prepared.first_round_only):
                continue
            try:
                side.samples.append(measure())
            except PeerMissing as missing:
                results[name] = SideResult([], missing=str(missing))
            except Exception as error:  # noqa: BLE001
                traceback.print_exc()
                results[name] = SideResult([], error=f"{type(error).__name__}: {error}")
        probe.sample(0.05 if sizes.quick else 0.2)
        last_round = time.monotonic() - began
    for name, work in prepared.profiles.items():
        try:
            measured = profile(work.action, seconds=0.1 if sizes.quick else 1.0, most=work.most)
            prepared.notes[profile_key(name)] = measured if work.of is None else f"{work.of}: {measured}"
        except Exception as error:  # noqa: BLE001 - a profile is a note, never a verdict
            prepared.notes[profile_key(name)] = f"not profiled: {type(error).__name__}: {error}"
    return results, prepared.notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the benchmark runs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write (default {DEFAULT_OUT})")
    parser.add_argument("--only", nargs="*", default=None, metavar="GROUP", help="run only these groups")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    started = time.monotonic()
    load_before = os.getloadavg()
    measured: dict[str, dict[str, SideResult]] = {}
    notes: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="runkernel-bench-") as scratch_name:
        scratch = Path(scratch_name)
        probe = FsyncProbe(scratch)
        probe.sample(0.05 if sizes.quick else 0.3)
        for group in groups(sizes):
            if args.only is not None and group.name not in args.only:
                continue
            began = time.monotonic()
            print(f"bench: {group.name} ...", file=sys.stderr, flush=True)
            measured[group.name], notes[group.name] = run_group(
                group, sizes, scratch, probe, started + sizes.budget
            )
            print(f"bench: {group.name} done in {time.monotonic() - began:.1f}s", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    text = render(
        rows(sizes), measured, notes, sizes=sizes, fsync=probe.summary(), seconds=elapsed,
        load=(load_before, os.getloadavg()), argv=["python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])],
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"bench: wrote {args.out} after {elapsed:.0f}s", file=sys.stderr)
    if args.out == DEFAULT_OUT and args.only is None and not args.quick:
        return figures.main([])  # the README quotes this run, and only this one
    return 0


if __name__ == "__main__":
    sys.exit(main())
