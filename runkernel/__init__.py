"""runkernel: a formal state-machine kernel for durable AI-agent Runs.

This page is what a host needs (``from runkernel import Driver``): opening a store, the
drivers and the worker, a tool's policy, what a driver hands out and what the host
answers, the gate's answers, the pull-mode ports' answers, the trace judge and the
error tree. One name per concept in push mode, pull mode and the integrations: a
pull-mode tool runs the ``RunCall`` a push-mode host is handed, a model asks for the
``CallRequest`` s a push-mode host answers with, and a gate answers ``Permit``,
``Refuse``, ``Provide`` or ``Hold`` in both.

Everything else lives in a documented module (``docs/api.md`` documents each):
``runkernel.kernel`` the kernel's vocabulary (``decide``, ``recover``,
``validate_commit``, the state, input and effect types); ``runkernel.errors`` every error;
the stores and their contract in their modules (``runkernel.adapters.stores.contract``,
``.memory``, ``.sqlite``, ``.postgres``, ``runkernel.conformance``); the pull-mode ports'
protocols in ``runkernel.adapters.drive.ports``.

Names load on first use (module ``__getattr__``), so ``import runkernel`` costs little
and needs only the core dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

#: The public API by section: (title, ((module, names), ...)). The API reference is
#: generated from this table, and ``__all__`` is every name in it.
SECTIONS: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    (
        "Opening a store",
        (("runkernel.adapters.stores.registry", ("open_store",)),),
    ),
    (
        "Driving Runs: push mode (Driver, AsyncDriver), pull mode (Runtime), workers",
        (
            ("runkernel.adapters.drive.driver", ("Driver", "AsyncDriver")),
            ("runkernel.adapters.drive.runtime", ("Runtime",)),
            ("runkernel.adapters.worker.loop", ("Worker",)),
            ("runkernel.adapters.worker.apps", ("RuntimeApp",)),
        ),
    ),
    (
        "A tool's recovery policy",
        (("runkernel.kernel", ("ToolPolicy",)),),
    ),
    (
        "What a push-mode driver hands out (a pull-mode runtime answers the same with its ports)",
        (("runkernel.adapters.drive.actions", ("Infer", "RunCall", "RunCalls", "CheckStatus", "Fence", "WaitFor", "ChildrenRunning", "Done")),),
    ),
    (
        "What the host answers",
        (
            ("runkernel.adapters.drive.actions", ("CallRequest",)),
            ("runkernel.kernel", ("Approve", "Deny", "OperationStatus", "EndCauseKind")),
        ),
    ),
    (
        "The gate's answers, in both modes",
        (
            ("runkernel.adapters.drive.ports", ("Permit", "Refuse", "Provide", "Hold")),
            ("runkernel.kernel", ("WaitKind",)),
        ),
    ),
    (
        "Pull mode: what the runtime asks its ports, and what they answer",
        (
            (
                "runkernel.adapters.drive.ports",
                ("ToolRegistry", "InferenceRequest", "ModelReply", "Returned", "Failed", "StatusReply"),
            ),
        ),
    ),
    (
        "Inside a tool",
        (("runkernel.adapters.drive.invocation", ("current_invocation",)),),
    ),
    (
        "Forking a Run",
        (("runkernel.adapters.drive.fork", ("fork",)),),
    ),
    (
        "Checking traces",
        (("runkernel.specs.check", ("check_trace",)),),
    ),
    (
        "Errors: one root, three branches by whose fault it is (every error: runkernel.errors)",
        (("runkernel.errors", ("RunkernelError", "UsageError", "PeerError", "StoreError")),),
    ),
)

_MODULE_OF: dict[str, str] = {
    name: module for _title, groups in SECTIONS for module, names in groups for name in names
}

__all__ = [*_MODULE_OF]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names, for type checkers (a test keeps the two in step)
    from runkernel.adapters.drive.driver import (
        AsyncDriver as AsyncDriver,
        Driver as Driver,
    )
    from runkernel.adapters.drive.actions import (
        CallRequest as CallRequest,
        CheckStatus as CheckStatus,
        ChildrenRunning as ChildrenRunning,
        Done as Done,
        Fence as Fence,
        Infer as Infer,
        RunCall as RunCall,
        RunCalls as RunCalls,
        WaitFor as WaitFor,
    )
    from runkernel.adapters.drive.invocation import (
        current_invocation as current_invocation,
    )
    from runkernel.adapters.drive.ports import (
        Failed as Failed,
        Hold as Hold,
        InferenceRequest as InferenceRequest,
        ModelReply as ModelReply,
        Permit as Permit,
        Provide as Provide,
        Refuse as Refuse,
        Returned as Returned,
        StatusReply as StatusReply,
        ToolRegistry as ToolRegistry,
    )
    from runkernel.adapters.drive.runtime import (
        Runtime as Runtime,
    )
    from runkernel.adapters.stores.registry import (
        open_store as open_store,
    )
    from runkernel.adapters.worker.loop import (
        Worker as Worker,
    )
    from runkernel.adapters.worker.apps import (
        RuntimeApp as RuntimeApp,
    )
    from runkernel.errors import (
        PeerError as PeerError,
        RunkernelError as RunkernelError,
        StoreError as StoreError,
        UsageError as UsageError,
    )
    from runkernel.kernel import (
        Approve as Approve,
        Deny as Deny,
        EndCauseKind as EndCauseKind,
        OperationStatus as OperationStatus,
        ToolPolicy as ToolPolicy,
        WaitKind as WaitKind,
    )
    from runkernel.adapters.drive.fork import (
        fork as fork,
    )
    from runkernel.specs.check import (
        check_trace as check_trace,
    )
