"""The push-mode driver: for hosts that call the model and the tools themselves.

The host says what happened and gets back what to do next (``Infer``, ``RunCall``,
``CheckStatus``, ``WaitFor``, ``ChildrenRunning``, ``Done``); the driver commits through
the store in between. A tool declared a terminal-only delegation is never handed out as a
``RunCall``: the driver activates its child Run itself (after the call's Executing commit
is durable) and says ``ChildrenRunning`` while the parent has nothing else to do.
``Driver`` is for synchronous hosts, ``AsyncDriver`` for asyncio ones; both are thin
shells around the one sans-IO core in ``core.py`` and differ only in how they
carry out its operations (an async shell awaits an async gate). They have one source:
``AsyncDriver`` is written by hand (``driver_async.py``) and ``Driver``
(``driver_sync.py``) is generated from it by ``tools/async_to_sync.py``, which a test
runs to fail while the two differ; what does no I/O is ``Shell``'s (``shell.py``).

A driver holds no truth of its own. After a crash, a fresh driver's ``pick_up(run_id)``
continues from the store alone and hands out exactly what ``recover`` authorizes: a
replay attempt (its Executing{n+1} already durable), a reconnect status question, the
wait again, or the terminus again. If a store call fails while it drives, the driver
forgets what it believed (``DriverStopped``) and its next ``next_action()`` picks the
Run up again the same way.
"""

from __future__ import annotations

from runkernel.adapters.drive.driver_async import AsyncDriver
from runkernel.adapters.drive.shell import AnyGate
from runkernel.adapters.drive.driver_sync import Driver

__all__ = ["AnyGate", "AsyncDriver", "Driver"]
