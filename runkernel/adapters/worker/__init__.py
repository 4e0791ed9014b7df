"""The worker: the loop that finds Runs with work, leases and drives each (``loop``), the
host applications it loads and the hosts built for them (``apps``), how it drives a push app (``push_drive``, on one
event loop per worker: ``app_loop``), the Runs it sets aside while a model call backs off
(``set_aside``), what it reports (``account``) and how it rides out a store outage
(``outage``).

Modules here may import ``runkernel.adapters.drive`` and everything below it, never the
CLI (``tests/test_layers.py``).

``runkernel.adapters.worker`` was a module until 0.2: its one documented name,
``WorkerReport``, still resolves here with a ``DeprecationWarning`` (it lives in
``runkernel.adapters.worker.loop``); it goes in runkernel 0.3."""

from runkernel._deprecation import Moved as _Moved, moved_names as _moved_names

__getattr__ = _moved_names(__name__, {"WorkerReport": _Moved("runkernel.adapters.worker.loop", "WorkerReport")})
