"""The app the worker group's ``runkernel worker`` processes drive
(``--app bench.worker_app:app``): a Run is two ``lookup`` calls asked for at once, then
an answer; its name is ``BENCH_APP`` (one per round, so a round's Runs are its own).

Importing it arms the process's probe (``bench.unit_probe``) before the worker opens
its store, and the first step-1 answer in the process waits for the group's go.
"""

from __future__ import annotations

import os

from bench import subject, unit_probe

unit_probe.arm()

app = subject.two_call_app(os.environ.get("BENCH_APP", "bench"), unit_probe.barrier)
