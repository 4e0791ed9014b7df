"""runkernel: a formal state-machine kernel for durable AI-agent Runs.

Every name a host needs is importable from here (``from runkernel import Driver``), each
documented; ``docs/api.md`` is generated from these docstrings
(``python -m runkernel.specs.api_doc``). Names load on first use (module
``__getattr__``), so ``import runkernel`` costs little and needs only the core
dependencies; optional stores and integrations join the table below without changing
that. ``runkernel.kernel`` is the pure core, ``runkernel.specs`` the executable spec and
the trace checker, ``runkernel.adapters`` the stores and the drivers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The public API by section: (title, ((module, names), ...)). The API reference is
#: generated from this table, and ``__all__`` is every name in it.
SECTIONS: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    (
        'Kernel: deciding, validating, recovering',
        (
            (
                'runkernel.kernel',
                (
                    'decide', 'recover', 'validate_commit', 'NO_TICKETS_SEEN', 'check_resume', 'Accepted',
                    'RecoveryDecision', 'RecoveryRow', 'Rejection', 'Rule', 'Policies',
                    'ToolPolicy', 'ToolRecoveryPolicy', 'RecoveryMode', 'RetryPolicy',
                    'IndeterminateChoice',
                ),
            ),
        ),
    ),
    (
        'Kernel: committed state',
        (
            (
                'runkernel.kernel',
                (
                    'RunSnapshot', 'Running', 'Awaiting', 'Ended', 'EndCause', 'EndCauseKind',
                    'TypedError', 'ThreadCommit', 'ThreadHead', 'Event', 'Message', 'Role',
                    'ToolUse', 'ActiveToolBatch', 'ToolCall', 'CallRequested', 'CallExecuting',
                    'CallAwaiting', 'CallCompleted', 'CallIndeterminate', 'ToolResult',
                    'ResultKind', 'IndeterminateReason', 'Wait', 'WaitKind', 'ResumeTicket',
                    'JsonValue', 'Staged', 'Delegation', 'ParentCall',
                ),
            ),
        ),
    ),
    (
        'Kernel: inputs',
        (
            (
                'runkernel.kernel.protocol',
                (
                    'Activate', 'InferenceResult', 'ProposedCall', 'GateVerdict', 'Allow', 'Block',
                    'Supply', 'RequireWait', 'ToolFinished', 'ToolOutput', 'ToolFailure',
                    'ToolDelegated', 'ToolScheduled', 'ToolOutcomeLost', 'StatusReport',
                    'OperationStatus', 'ResumeCommand', 'Approve', 'Deny', 'ProvideInput',
                    'ExternalResult', 'DelegationResult', 'TimerFired', 'DeadlinePassed',
                    'EndRequest', 'ChildEnded', 'ChildTerminus',
                ),
            ),
        ),
    ),
    (
        'Kernel: effects',
        (
            (
                'runkernel.kernel.protocol',
                (
                    'Decision', 'Commit', 'RunHook', 'Hook', 'RequestInference', 'RunGate',
                    'Execute', 'QueryStatus', 'NotifyWait', 'PublishResults', 'DeliverTerminus',
                    'StartChild', 'CancelChild',
                ),
            ),
        ),
    ),
    (
        'Stores',
        (
            (
                'runkernel.adapters.urls',
                (
                    'open_store',
                ),
            ),
            (
                'runkernel.adapters.store',
                (
                    'Store', 'InboxEntry', 'Lease', 'Writer',
                ),
            ),
            (
                'runkernel.adapters.work',
                (
                    'RunSummary',
                ),
            ),
            (
                'runkernel.adapters.memory_store',
                (
                    'MemoryStore',
                ),
            ),
            (
                'runkernel.adapters.sqlite_store',
                (
                    'SqliteStore',
                ),
            ),
            (
                'runkernel.adapters.postgres_store',
                (
                    'PostgresStore',
                ),
            ),
            (
                'runkernel.adapters.postgres_schema',
                (
                    'init_postgres', 'migrate_postgres',
                ),
            ),
            (
                'runkernel.adapters.inbox',
                (
                    'submit_resume', 'submit_end',
                ),
            ),
            (
                'runkernel.adapters.delegations',
                (
                    'parent_of', 'ended_children', 'parents_to_wake',
                ),
            ),
        ),
    ),
    (
        'Push-mode driver (the host calls the model and the tools)',
        (
            (
                'runkernel.adapters.driver',
                (
                    'Driver', 'AsyncDriver',
                ),
            ),
            (
                'runkernel.adapters.driver_actions',
                (
                    'Action', 'Infer', 'RunCall', 'CheckStatus', 'WaitFor', 'ChildrenRunning', 'ChildRun',
                    'Done', 'CallRequest',
                    'Answer', 'HistoryView', 'DEFAULT_MAX_STEPS',
                ),
            ),
        ),
    ),
    (
        "Pull-mode runtime (the runtime calls the host's ports)",
        (
            (
                'runkernel.adapters.runtime',
                (
                    'Runtime', 'RunOutcome',
                ),
            ),
            (
                'runkernel.adapters.ports',
                (
                    'ModelPort', 'InferenceRequest', 'ModelReply', 'ModelCall', 'StreamSink',
                    'Tool', 'ToolRegistry', 'ToolInvocation', 'Returned', 'Failed', 'Delegate',
                    'Schedule', 'Lost', 'StatusReply', 'GatePort', 'AllowAll', 'Permit', 'Refuse',
                    'Provide', 'Hold', 'Observer', 'NullObserver', 'IdSource', 'SecretIds',
                    'HookPort', 'NoHooks', 'Staging',
                ),
            ),
            (
                'runkernel.adapters.invocation',
                (
                    'current_invocation', 'invocation_scope',
                ),
            ),
        ),
    ),
    (
        'Workers and leases',
        (
            (
                'runkernel.adapters.worker',
                (
                    'Worker', 'WorkerReport',
                ),
            ),
            (
                'runkernel.adapters.worker_app',
                (
                    'RuntimeApp', 'PushApp', 'AsyncPushApp', 'load_app',
                ),
            ),
            (
                'runkernel.adapters.worker_lease',
                (
                    'LeaseKeeper',
                ),
            ),
        ),
    ),
    (
        'Checking traces',
        (
            (
                'runkernel.specs.check',
                (
                    'check_trace',
                ),
            ),
            (
                'runkernel.specs.checker',
                (
                    'Finding', 'Verdict',
                ),
            ),
        ),
    ),
    (
        "Errors: one root, three branches by whose fault it is",
        (
            (
                'runkernel.errors',
                (
                    'RunkernelError',
                    'UsageError', 'DriverError', 'UnknownTool', 'MetadataUnsupported',
                    'HostProtocolError', 'BadToolPolicy', 'BadStoreUrl', 'UnknownRun',
                    'AppLoadError', 'NoInvocation',
                    'PeerError', 'RejectedError', 'IllegalCommit', 'RuntimeProtocolError',
                    'StoreError', 'CommitConflict', 'StoreUnavailable', 'SchemaError',
                    'LeaseError', 'LeaseHeld', 'LeaseLost', 'DriverStopped',
                    'KernelBug',
                ),
            ),
        ),
    ),
)

_MODULE_OF: dict[str, str] = {
    name: module for _title, groups in SECTIONS for module, names in groups for name in names
}

__all__ = ["SECTIONS", "__version__", *_MODULE_OF]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'runkernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names, for type checkers (a test keeps the two in step)
    from runkernel.adapters.driver import (
        AsyncDriver as AsyncDriver,
        Driver as Driver,
    )
    from runkernel.adapters.driver_actions import (
        Action as Action,
        Answer as Answer,
        CallRequest as CallRequest,
        CheckStatus as CheckStatus,
        ChildRun as ChildRun,
        ChildrenRunning as ChildrenRunning,
        DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS,
        Done as Done,
        HistoryView as HistoryView,
        Infer as Infer,
        RunCall as RunCall,
        WaitFor as WaitFor,
    )
    from runkernel.adapters.delegations import (
        ended_children as ended_children,
        parent_of as parent_of,
        parents_to_wake as parents_to_wake,
    )
    from runkernel.adapters.inbox import (
        submit_end as submit_end,
        submit_resume as submit_resume,
    )
    from runkernel.adapters.memory_store import (
        MemoryStore as MemoryStore,
    )
    from runkernel.adapters.ports import (
        AllowAll as AllowAll,
        Delegate as Delegate,
        Failed as Failed,
        GatePort as GatePort,
        Hold as Hold,
        HookPort as HookPort,
        IdSource as IdSource,
        InferenceRequest as InferenceRequest,
        Lost as Lost,
        ModelCall as ModelCall,
        ModelPort as ModelPort,
        ModelReply as ModelReply,
        NoHooks as NoHooks,
        NullObserver as NullObserver,
        Observer as Observer,
        Permit as Permit,
        Provide as Provide,
        Refuse as Refuse,
        Returned as Returned,
        Schedule as Schedule,
        SecretIds as SecretIds,
        Staging as Staging,
        StatusReply as StatusReply,
        StreamSink as StreamSink,
        Tool as Tool,
        ToolInvocation as ToolInvocation,
        ToolRegistry as ToolRegistry,
    )
    from runkernel.adapters.invocation import (
        current_invocation as current_invocation,
        invocation_scope as invocation_scope,
    )
    from runkernel.adapters.worker import (
        Worker as Worker,
        WorkerReport as WorkerReport,
    )
    from runkernel.adapters.worker_app import (
        AsyncPushApp as AsyncPushApp,
        PushApp as PushApp,
        RuntimeApp as RuntimeApp,
        load_app as load_app,
    )
    from runkernel.adapters.worker_lease import (
        LeaseKeeper as LeaseKeeper,
    )
    from runkernel.adapters.postgres_schema import (
        init_postgres as init_postgres,
        migrate_postgres as migrate_postgres,
    )
    from runkernel.adapters.postgres_store import (
        PostgresStore as PostgresStore,
    )
    from runkernel.adapters.runtime import (
        RunOutcome as RunOutcome,
        Runtime as Runtime,
    )
    from runkernel.adapters.sqlite_store import (
        SqliteStore as SqliteStore,
    )
    from runkernel.adapters.store import (
        InboxEntry as InboxEntry,
        Lease as Lease,
        Store as Store,
        Writer as Writer,
    )
    from runkernel.adapters.work import (
        RunSummary as RunSummary,
    )
    from runkernel.adapters.urls import (
        open_store as open_store,
    )
    from runkernel.errors import (
        AppLoadError as AppLoadError,
        BadStoreUrl as BadStoreUrl,
        BadToolPolicy as BadToolPolicy,
        CommitConflict as CommitConflict,
        DriverError as DriverError,
        DriverStopped as DriverStopped,
        HostProtocolError as HostProtocolError,
        IllegalCommit as IllegalCommit,
        KernelBug as KernelBug,
        LeaseError as LeaseError,
        LeaseHeld as LeaseHeld,
        LeaseLost as LeaseLost,
        MetadataUnsupported as MetadataUnsupported,
        NoInvocation as NoInvocation,
        PeerError as PeerError,
        RejectedError as RejectedError,
        RunkernelError as RunkernelError,
        RuntimeProtocolError as RuntimeProtocolError,
        SchemaError as SchemaError,
        StoreError as StoreError,
        StoreUnavailable as StoreUnavailable,
        UnknownRun as UnknownRun,
        UnknownTool as UnknownTool,
        UsageError as UsageError,
    )
    from runkernel.kernel import (
        Accepted as Accepted,
        ActiveToolBatch as ActiveToolBatch,
        Awaiting as Awaiting,
        CallAwaiting as CallAwaiting,
        CallCompleted as CallCompleted,
        CallExecuting as CallExecuting,
        CallIndeterminate as CallIndeterminate,
        CallRequested as CallRequested,
        EndCause as EndCause,
        EndCauseKind as EndCauseKind,
        Ended as Ended,
        Event as Event,
        IndeterminateChoice as IndeterminateChoice,
        IndeterminateReason as IndeterminateReason,
        JsonValue as JsonValue,
        Message as Message,
        Policies as Policies,
        RecoveryDecision as RecoveryDecision,
        RecoveryMode as RecoveryMode,
        RecoveryRow as RecoveryRow,
        Rejection as Rejection,
        ResultKind as ResultKind,
        ResumeTicket as ResumeTicket,
        RetryPolicy as RetryPolicy,
        Role as Role,
        Rule as Rule,
        RunSnapshot as RunSnapshot,
        Running as Running,
        Staged as Staged,
        Delegation as Delegation,
        ParentCall as ParentCall,
        ThreadCommit as ThreadCommit,
        ThreadHead as ThreadHead,
        ToolCall as ToolCall,
        ToolPolicy as ToolPolicy,
        ToolRecoveryPolicy as ToolRecoveryPolicy,
        ToolResult as ToolResult,
        ToolUse as ToolUse,
        TypedError as TypedError,
        Wait as Wait,
        WaitKind as WaitKind,
        check_resume as check_resume,
        decide as decide,
        recover as recover,
        validate_commit as validate_commit,
        NO_TICKETS_SEEN as NO_TICKETS_SEEN,
    )
    from runkernel.kernel.protocol import (
        Activate as Activate,
        Allow as Allow,
        Approve as Approve,
        Block as Block,
        CancelChild as CancelChild,
        ChildEnded as ChildEnded,
        ChildTerminus as ChildTerminus,
        Commit as Commit,
        DeadlinePassed as DeadlinePassed,
        Decision as Decision,
        DelegationResult as DelegationResult,
        DeliverTerminus as DeliverTerminus,
        Deny as Deny,
        EndRequest as EndRequest,
        Execute as Execute,
        ExternalResult as ExternalResult,
        GateVerdict as GateVerdict,
        Hook as Hook,
        InferenceResult as InferenceResult,
        NotifyWait as NotifyWait,
        OperationStatus as OperationStatus,
        ProposedCall as ProposedCall,
        ProvideInput as ProvideInput,
        PublishResults as PublishResults,
        QueryStatus as QueryStatus,
        RequestInference as RequestInference,
        RequireWait as RequireWait,
        ResumeCommand as ResumeCommand,
        RunGate as RunGate,
        RunHook as RunHook,
        StartChild as StartChild,
        StatusReport as StatusReport,
        Supply as Supply,
        TimerFired as TimerFired,
        ToolDelegated as ToolDelegated,
        ToolFailure as ToolFailure,
        ToolFinished as ToolFinished,
        ToolOutcomeLost as ToolOutcomeLost,
        ToolOutput as ToolOutput,
        ToolScheduled as ToolScheduled,
    )
    from runkernel.specs.check import (
        check_trace as check_trace,
    )
    from runkernel.specs.checker import (
        Finding as Finding,
        Verdict as Verdict,
    )
