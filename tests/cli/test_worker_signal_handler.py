"""The worker command's signal handler never waits for a lock: a Python signal handler
runs between two bytecodes of the main thread, which may hold the lock of the stop
event at that moment (inside ``Event.wait``). A handler that set the event itself would
wait on that lock for ever; ours hands the signal to a thread of its own."""

from __future__ import annotations

import signal
import threading

from runkernel.cli.worker_command import _Stopping

#: a bound only a hang reaches (never a figure asserted)
HANG = 30.0


def test_a_signal_landing_while_the_stop_events_lock_is_held_is_handled_once_it_is_free() -> None:
    handled: list[bool] = []

    def interrupted(stopping: _Stopping) -> None:
        with stopping.requested._cond:  # type: ignore[attr-defined]  # where Event.wait holds it
            stopping._signalled(signal.SIGTERM, None)  # the handler, run right here
            handled.append(stopping.requested.is_set())
        handled.append(stopping.requested.wait(HANG))

    with _Stopping(30.0) as stopping:
        # the interrupted code in a thread of its own, so a handler that hangs fails the test
        thread = threading.Thread(target=interrupted, args=(stopping,), daemon=True)
        thread.start()
        thread.join(HANG)
        print(f"handler returned: {not thread.is_alive()}; stop requested (while the lock was held, after): {handled}")
        assert not thread.is_alive(), "the signal handler waited for a lock its own thread held"
    assert handled == [False, True], "the stop is asked for once the lock is free, not before"
