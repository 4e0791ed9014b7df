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



class SharedAppLoop(AppLoop):
    """The one event loop a worker's slots share for its asyncio app, run by a thread of
    its own: each slot's drive is a task on it, and the slot's thread waits for its task
    (the drives' store calls run off the loop, ``store_thread``, so one slow model or tool
    never delays another Run)."""

    def __init__(self) -> None:
        super().__init__()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._made = threading.Lock()
        self._drives = 0

    def run(self, drive: Coroutine[Any, Any, object]) -> None:
        """Run one drive as a task on the shared loop, and wait for it."""
        with self._made:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="runkernel app loop", daemon=True)
                self._thread.start()
            self._drives += 1
        try:
            asyncio.run_coroutine_threadsafe(drive, loop).result()
        finally:
            with self._made:
                self._drives -= 1

    def close_unless_running(self) -> None:
        with self._made:
            if self._drives:
                return
        self.close()

    def close(self) -> None:
        """Stop and close the loop (its slots' drives are done: the worker joined them)."""
        with self._made:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_settle(loop), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does before it closes its loop: cancel what the app left
    running, then shut down async generators and the default executor."""
    leftover = [task for task in asyncio.all_tasks(loop) if task is not asyncio.current_task()]
    for task in leftover:
        task.cancel()
    await asyncio.gather(*leftover, return_exceptions=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


__all__ = ["AppLoop", "SharedAppLoop"]
