"""A worker's stop flag: asked for from anywhere, a signal handler included, and seen at
once by every thread that waits on it (Workers and leases: shutdown).

A Python signal handler runs on the main thread between two of its bytecodes, maybe
while that thread holds a lock the handler would take: a ``threading.Event`` is a lock
and a condition, so setting one in a handler that landed inside ``Event.wait`` waits for
its own thread for ever. ``request()`` takes no lock and sets no event: it sets a plain
attribute and writes one byte to a pipe (``os.write`` is async-signal-safe). ``wait()``
sleeps in ``poll`` on the pipe's read end, which that byte makes readable for every
waiter, and for good: the pipe is never drained, a stop is never taken back.

The pipe is made by the first wait (a worker that never waits holds no descriptors) and
closed when the flag is collected.
"""

from __future__ import annotations

import math
import os
import select
import threading
import weakref


class StopFlag:
    """Whether a stop was asked for, and a wait that the ask ends at once."""

    def __init__(self) -> None:
        self._requested = False
        #: the wake-up pipe (read end, write end), once a waiter made it
        self._pipe: tuple[int, int] | None = None
        self._making = threading.Lock()  # only waiters take it, never ``request()``

    @property
    def requested(self) -> bool:
        """True once ``request()`` was called."""
        return self._requested

    def request(self) -> None:
        """Ask for the stop and wake every waiter: safe in a signal handler (no lock, no
        event, no allocation but one byte), from any thread, and more than once."""
        self._requested = True
        pipe = self._pipe
        if pipe is not None:
            try:
                os.write(pipe[1], b"\0")
            except OSError:  # full (so readable already), or closed with the flag
                pass

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for ``request()``; whether it was asked for."""
        if self._requested or seconds <= 0:
            return self._requested
        read = self._wake_up()
        # asked for before the pipe was there (nothing written): seen here
        if not self._requested:
            poller = select.poll()
            poller.register(read, select.POLLIN)
            poller.poll(math.ceil(seconds * 1000))
        return self._requested

    def _wake_up(self) -> int:
        """The pipe's read end, made now if no waiter made it before."""
        with self._making:
            if self._pipe is None:
                read, write = os.pipe()
                os.set_blocking(write, False)
                weakref.finalize(self, _close, read, write)
                self._pipe = (read, write)
            return self._pipe[0]


def _close(*descriptors: int) -> None:
    for descriptor in descriptors:
        os.close(descriptor)


__all__ = ["StopFlag"]
