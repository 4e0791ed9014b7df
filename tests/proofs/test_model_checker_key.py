"""The model checker merges two states only when the kernel cannot tell them apart: a
state's key holds every field of the committed snapshot that ``decide`` and the judges
read. A snapshot's answered inputs and staged state are such fields (the gate and the
tools of a later attempt see the input; the hooks see the staged state), so two
snapshots that differ in them alone are two states."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the checker's modules are top-level scripts' siblings

from mc_encode import enc_snapshot  # noqa: E402
from runkernel.kernel.state import ProvidedInput, Running, RunSnapshot  # noqa: E402


def _snapshot() -> RunSnapshot:
    return RunSnapshot("t", "r", 3, 1, Running(), None)


def test_every_field_of_a_snapshot_the_kernel_reads_is_in_its_key_but_the_version() -> None:
    base = _snapshot()
    answered = attrs.evolve(base, provided_inputs=(ProvidedInput("c1", "operator-input"),))
    other_answer = attrs.evolve(base, provided_inputs=(ProvidedInput("c1", "another"),))
    staged = attrs.evolve(base, staged={"draft": 1})
    keys = [enc_snapshot(s) for s in (base, answered, other_answer, staged)]
    assert len(set(keys)) == 4, keys
    # the absolute version is left out on purpose: a state is the same at any version
    assert enc_snapshot(attrs.evolve(base, version=9)) == enc_snapshot(base)
    # and the key names every other field RunSnapshot has (a new field shows here)
    assert [f.name for f in attrs.fields(RunSnapshot)] == [
        "thread_id", "run_id", "version", "step", "state", "batch", "provided_inputs", "staged",
    ]
