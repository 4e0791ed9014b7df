"""Deprecated: moved to ``runkernel.adapters.worker.apps``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.worker.apps import (
    AsyncPushApp as AsyncPushApp,
    PushApp as PushApp,
    RuntimeApp as RuntimeApp,
    WorkerApp as WorkerApp,
    load_app as load_app,
)

moved_module(__name__, "runkernel.adapters.worker.apps")
