"""The OpenTelemetry row: what ``telemetry=OpenTelemetry()`` costs a
drive with the ``otel`` extra installed and no exporter configured (the API's global
providers: every span non-recording), against the same agent loop without telemetry,
in memory (no fsync to hide the cost behind)."""

from __future__ import annotations

import time
from pathlib import Path

from bench import subject
from bench.framework import Measure, Prepared, Sample, Sizes
from bench.peers import PeerMissing

STEPS = 20


def otel_overhead(sizes: Sizes, scratch: Path) -> Prepared:
    """Two sides: the agent loop of ``STEPS`` tool steps with ``OpenTelemetry()`` and
    without telemetry, ``repeat`` fresh Runs on fresh memory stores per round."""
    try:
        from runkernel.integrations.otel import OpenTelemetry
    except ImportError as error:
        raise PeerMissing(f"the otel extra is not installed ({error})") from None
    repeat = 5 if sizes.quick else 20
    telemetry = OpenTelemetry()

    def side(traced: bool) -> Measure:
        def measure() -> Sample:
            seconds = 0.0
            for _ in range(repeat):
                store = subject.memory_store()
                started = time.perf_counter()
                subject.run_agent(store, "agent", STEPS, telemetry=telemetry if traced else None)
                seconds += time.perf_counter() - started
                store.close()
            return Sample(seconds, STEPS * repeat)

        return measure

    return Prepared({"OpenTelemetry()": side(True), "none": side(False)})
