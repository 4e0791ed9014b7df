"""How a worker drives a Run of a push app (``PushApp``, ``AsyncPushApp``): the driver
it builds for the app, under the worker's leases and options, handed to the app's own
loop (on the worker's one event loop for an asyncio app, ``app_loop``); a driver that
stopped on a lost commit or a lost lease raises that cause, as a pull-mode drive does.
"""

from __future__ import annotations

from runkernel.adapters.drive.actions import DriverStopped
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.stores.contract import CommitConflict, LeaseLost, Store
from runkernel.adapters.worker.account import WorkerReport
from runkernel.adapters.worker.app_loop import AppLoop
from runkernel.adapters.worker.apps import AsyncPushApp, HostOptions, PushApp, app_async_driver, app_driver


def drive_push(
    store: Store,
    app: PushApp | AsyncPushApp,
    run_id: str,
    app_loop: AppLoop,
    report: WorkerReport,
    host: HostOptions,
) -> None:
    """Drive ``run_id`` with ``app`` until the app returns; its driver's commits are
    counted in ``report`` whatever happens. ``host`` holds the worker's own options
    (ids, clock, leases, events, telemetry): the app's cannot override them."""
    driver: Driver | AsyncDriver | None = None
    try:
        if isinstance(app, AsyncPushApp):
            driver = app_async_driver(app, store, host, AsyncDriver)
            app_loop.run(app.drive(driver, run_id))
        else:
            driver = app_driver(app, store, host, Driver)
            app.serve(driver, driver.pick_up(run_id))
    except DriverStopped as stopped:
        cause = stopped.__cause__
        if isinstance(cause, (CommitConflict, LeaseLost)):
            raise cause from None
        raise  # counted and reported by the worker's ``drive``, like any other failure
    finally:
        report.commits += driver.commits if driver is not None else 0


__all__ = ["drive_push"]
