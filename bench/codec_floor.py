"""The codec rows' limits, measured on the codec group's own commits (run by hand).

    python -m bench.codec_floor [--rounds N]

Interleaved rounds, each side the best of 3 loops over the 11 commits of a 3-step
agent Run (``bench.measures.codec``'s data); prints each ratio's min and median:

- decode: the kernel's attrs constructors alone (ThreadCommit, ActiveToolBatch,
  ToolCall, from ready values: what the typed reader must run in Python, because
  msgspec cannot build the kernel's unions) ÷ msgspec's untyped decode of the lines.
  The decode row can at best reach 1 ÷ (1 + typed decode + this).
- encode: orjson ÷ msgspec's encode of the ready dict, and ÷ msgspec's encode of the
  ready Struct tree ``commit_line`` builds (the encode row's ceiling with no Python).
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import msgspec

from bench import peers, subject
from runkernel.kernel import codec_encode
from runkernel.kernel.state import ActiveToolBatch, ThreadCommit, ToolCall


def _constructors(commits: list[ThreadCommit]) -> Callable[[], None]:
    def build() -> None:
        for c in commits:
            batch = c.batch
            if batch is not None:
                for x in batch.calls:
                    ToolCall(x.call_id, x.tool, x.arguments, x.operation_id, x.status, x.policy, x.reaction, x.delegation)
                ActiveToolBatch(batch.batch_id, batch.step, batch.finalized, batch.calls)
            ThreadCommit(
                c.thread_id, c.run_id, c.expected_version, c.step, c.disposition, batch, c.messages, c.events,
                app=c.app, staged=c.staged, parent=c.parent,
            )

    return build


def _struct_trees(commits: list[ThreadCommit]) -> list[Any]:
    """The Struct trees ``commit_line`` hands msgspec, caught before encoding."""
    trees: list[Any] = []

    class Catch:
        def encode(self, value: Any) -> bytes:
            trees.append(value)
            return b""

    real = codec_encode._ENCODER
    codec_encode._ENCODER = Catch()  # type: ignore[assignment]
    try:
        for commit in commits:
            codec_encode.commit_line(commit)
    finally:
        codec_encode._ENCODER = real
    return trees


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    commits = subject.sample_commits(3)
    lines = [subject.encode_commit(c).encode() for c in commits]
    dicts = [subject.commit_as_dict(c) for c in commits]
    trees = _struct_trees(commits)
    untyped, encoder, dumps = msgspec.json.Decoder(), msgspec.json.Encoder(), peers.orjson_module().dumps
    sides: dict[str, Callable[[], object]] = {
        "untyped decode": lambda: [untyped.decode(line) for line in lines],
        "attrs constructors": _constructors(commits),
        "orjson": lambda: [dumps(d) for d in dicts],
        "msgspec dict encode": lambda: [encoder.encode(d) for d in dicts],
        "msgspec Struct encode": lambda: [encoder.encode(t) for t in trees],
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, side in sides.items():
            times[name].append(min(timeit.repeat(side, number=500, repeat=3)))
    for label, a, b in (
        ("attrs constructors ÷ untyped decode (time)", "attrs constructors", "untyped decode"),
        ("msgspec dict encode ÷ orjson (rate)", "orjson", "msgspec dict encode"),
        ("msgspec Struct encode ÷ orjson (rate)", "orjson", "msgspec Struct encode"),
    ):
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        print(f"{label}: min {min(ratios):.2f}, median {statistics.median(ratios):.2f} ({args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
