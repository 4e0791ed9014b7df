"""A signal handler landing between any two bytecodes of the code it interrupts, made
deterministic: a Python handler runs on the main thread between two of its bytecodes,
maybe while that thread holds a lock the handler would take (the lock inside
``threading.Event.wait``, say). Tests here run the interrupted code under a trace
function that calls the handler at the N-th bytecode, for every N of a stretch of code,
in a thread of its own, so a handler that waits for its own thread fails the test
instead of hanging it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

#: a bound only a hang reaches (never a figure asserted)
HANG = 30.0


class Landing:
    """Calls ``handler`` between two bytecodes: at the ``at``-th counted once ``arm()``
    was called (None: never, only counting)."""

    def __init__(self, handler: Callable[[], object], at: int | None = None) -> None:
        self.handler, self.at = handler, at
        self.armed = False
        #: bytecodes run since ``arm()``
        self.counted = 0
        self.fired = False

    def arm(self) -> None:
        """Start counting from the next bytecode."""
        self.armed = True

    def trace(self, frame: FrameType, _event: str, _arg: Any) -> Callable[..., Any]:
        frame.f_trace_opcodes = True
        return self._opcode

    def _opcode(self, _frame: FrameType, event: str, _arg: Any) -> Callable[..., Any]:
        if event == "opcode" and self.armed and not self.fired:
            self.counted += 1
            if self.counted == self.at:
                self.fired = True
                self.handler()  # as a signal handler runs: here, between two bytecodes
        return self._opcode


def returned(target: Callable[[], object], landing: Landing) -> bool:
    """Run ``target`` traced by ``landing`` in a thread of its own; whether it returned
    (False: it hangs, a daemon thread left behind)."""

    def traced() -> None:
        sys.settrace(landing.trace)
        try:
            target()
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=traced, name="interrupted", daemon=True)
    thread.start()
    thread.join(HANG)
    return not thread.is_alive()
