"""How a worker drives a Run of a push app (``PushApp``, ``AsyncPushApp``): the driver
it builds for the app, under the worker's leases and options, handed to the app's own
loop (on the worker's one event loop for an asyncio app, ``app_loop``); a driver that
stopped on a lost commit or a lost lease raises that cause, as a pull-mode drive does.
"""

from __future__ import annotations

from typing import Any

from runkernel.adapters.drive.actions import DriverStopped
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.stores.contract import CommitConflict, LeaseLost, Store
from runkernel.adapters.worker.account import WorkerReport
from runkernel.adapters.worker.app_loop import AppLoop
from runkernel.adapters.worker.apps import AsyncPushApp, PushApp

#: What a push app may set on the driver the worker builds for it (as ``Driver`` takes them).
DRIVER_OPTIONS = ("gate", "max_steps", "on_indeterminate", "transient", "model_attempts", "fences")


def drive_push(
    store: Store,
    app: PushApp | AsyncPushApp,
    run_id: str,
    app_loop: AppLoop,
    report: WorkerReport,
    worker_options: dict[str, Any],
) -> None:
    """Drive ``run_id`` with ``app`` until the app returns; its driver's commits are
    counted in ``report`` whatever happens. ``worker_options`` are the worker's own
    (ids, clock, leases, app name, events, telemetry): the app's cannot override them."""
    options: dict[str, Any] = {k: getattr(app, k) for k in DRIVER_OPTIONS if hasattr(app, k)}
    options.update(worker_options)
    driver: Driver | AsyncDriver | None = None
    try:
        if isinstance(app, AsyncPushApp):
            driver = AsyncDriver(store, app.tools, **options)
            app_loop.run(app.drive(driver, run_id))
        else:
            driver = Driver(store, app.tools, **options)
            app.serve(driver, driver.pick_up(run_id))
    except DriverStopped as stopped:
        cause = stopped.__cause__
        if isinstance(cause, (CommitConflict, LeaseLost)):
            raise cause from None
        raise  # counted and reported by the worker's ``drive``, like any other failure
    finally:
        report.commits += driver.commits if driver is not None else 0


__all__ = ["DRIVER_OPTIONS", "drive_push"]
