"""The app the latency group's ``runkernel worker`` drives (``--app
bench.latency_app:app``): a Run is a model call, one ``lookup`` tool call and a second
model call, each waiting ``BENCH_LATENCY_SLEEP`` seconds (0.5 unless told); its name is
``BENCH_APP`` (one per round, so a round's Runs are its own).

Importing it arms the process's probe (``bench.unit_probe``) before the worker opens
its store, and the first step-1 answer in the process waits for the group's go.
"""

from __future__ import annotations

import os

from bench import subject, unit_probe

SLEEP = "BENCH_LATENCY_SLEEP"

unit_probe.arm()

app = subject.latency_app(os.environ.get("BENCH_APP", "bench"), float(os.environ.get(SLEEP, "0.5")), unit_probe.barrier)
