"""The one long-lived event loop a worker runs an asyncio push app on: made at the app's
first drive, kept across drives so what the app keeps (an HTTP client, a connection
pool) stays on the loop it was made on, and closed at shutdown, as ``asyncio.run``
closes its own (tasks cancelled, async generators and the default executor shut down),
but only when no drive runs on it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any


class AppLoop:
    """A worker's event loop for its asyncio app, and who runs it now."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._running = threading.Lock()

    def run(self, drive: Coroutine[Any, Any, object]) -> None:
        """Run one drive to its end on the loop (made now if there is none: again only if
        a shutdown closed it and the worker is still asked to drive)."""
        with self._running:
            if self._runner is None:
                self._runner = asyncio.Runner()
            self._runner.run(drive)

    def close_unless_running(self) -> None:
        """Close the loop now if no drive runs on it (a shutdown from a signal handler or
        another thread); else the drive's worker closes it once the drive returns."""
        if self._running.acquire(blocking=False):
            try:
                self._close()
            finally:
                self._running.release()

    def close(self) -> None:
        """Close the loop, after the drive running on it if any."""
        with self._running:
            self._close()

    def _close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()  # cancels what the app left running, then closes the loop


__all__ = ["AppLoop"]
