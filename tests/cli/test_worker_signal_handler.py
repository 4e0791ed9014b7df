"""The worker command's signal handler never waits for a lock: a Python signal handler
runs between two bytecodes of the main thread, which may hold a lock at that moment (the
one inside ``threading.Event.wait``, where the start used to wait). The handler landing
at every bytecode of the start's wait on its stop flag stops that wait, never hangs."""

from __future__ import annotations

import signal

from runkernel.cli.worker_command import _Stopping
from worker_signals import Landing, returned


def _wait_for_the_stop(stopping: _Stopping) -> None:
    """What the start does while the store is down: wait its backoff, look again."""
    while not stopping.stop.wait(0.001):
        pass


def test_a_signal_landing_at_any_bytecode_of_the_starts_wait_stops_it() -> None:
    with _Stopping(30.0) as stopping:
        counting = Landing(lambda: None)
        counting.arm()
        stopping.stop.wait(0.001)  # warm: the flag's pipe is made by its first wait
        assert returned(lambda: stopping.stop.wait(0.001), counting)
    one_wait = counting.counted
    hung, stopped = [], 0
    for at in range(1, one_wait + 1):
        with _Stopping(30.0) as stopping:
            landing = Landing(lambda: stopping._signalled(signal.SIGTERM, None), at=at)
            landing.arm()
            if not returned(lambda: _wait_for_the_stop(stopping), landing):
                hung.append(at)
                break
            stopped += landing.fired and stopping.signalled and stopping.stop.requested
    print(f"SIGTERM landed at each of {one_wait} bytecodes of the start's wait: {stopped} stopped it, hung at {hung}")
    assert not hung, f"the signal handler landing at bytecode {hung[0]} waited for a lock its own thread held"
    assert stopped == one_wait
