"""Where an asyncio host's store calls run: never on its event loop. ``AsyncDriver``
carries out each store operation on the one thread kept for its store, and awaits it.

One thread per store instance, not per driver: a store instance serves one thread of
control at a time (a SQLite connection, a PostgreSQL session and the memos of what the
instance wrote), and several drivers an application runs at once on one loop may share
one store. Their calls queue on its thread in the order they were made, as they ran on
the loop before; the loop meanwhile runs every other task. The thread exits once its
store is gone.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_threads: weakref.WeakKeyDictionary[object, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_made = threading.Lock()


def thread_of(store: object) -> ThreadPoolExecutor:
    """The one thread ``store``'s calls run on (made at the first call)."""
    with _made:
        found = _threads.get(store)
        if found is None:
            found = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runkernel-store")
            _threads[store] = found
            # the thread exits when the store is collected, not at some later exit
            weakref.finalize(store, found.shutdown, wait=False)
        return found


async def off_loop(store: object, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` on ``store``'s thread, awaited: the loop runs other tasks meanwhile."""
    return await asyncio.get_running_loop().run_in_executor(thread_of(store), call, *args)


__all__ = ["off_loop", "thread_of"]
