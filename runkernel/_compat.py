"""The names ``runkernel`` exported before its API fit on a page, and where each lives now.

``import runkernel`` stays cheap: this module loads only when an old name is used. Each
still resolves from ``runkernel`` for one release (to the same object; ``ToolInvocation``
to a shim that ``isinstance`` treats as ``RunCall``), with a ``DeprecationWarning`` that
names its new import path. CHANGELOG.md lists them. Type checkers read the same names
from the ``if TYPE_CHECKING`` block below (a test keeps it in step with ``MOVED``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runkernel._deprecation import Moved as _Moved

_PORTS = "runkernel.adapters.drive.ports"

#: Old name in ``runkernel`` -> where it lives now.
MOVED: dict[str, _Moved] = {
    # runkernel
    "ModelCall": _Moved("runkernel", "CallRequest"),
    "ToolInvocation": _Moved("runkernel", "RunCall", shim=(_PORTS, "_ToolInvocation")),
    # runkernel.kernel
    "decide": _Moved("runkernel.kernel", "decide"),
    "recover": _Moved("runkernel.kernel", "recover"),
    "validate_commit": _Moved("runkernel.kernel", "validate_commit"),
    "NO_TICKETS_SEEN": _Moved("runkernel.kernel", "NO_TICKETS_SEEN"),
    "check_resume": _Moved("runkernel.kernel", "check_resume"),
    "Accepted": _Moved("runkernel.kernel", "Accepted"),
    "RecoveryDecision": _Moved("runkernel.kernel", "RecoveryDecision"),
    "RecoveryRow": _Moved("runkernel.kernel", "RecoveryRow"),
    "Rejection": _Moved("runkernel.kernel", "Rejection"),
    "Rule": _Moved("runkernel.kernel", "Rule"),
    "Policies": _Moved("runkernel.kernel", "Policies"),
    "ToolRecoveryPolicy": _Moved("runkernel.kernel", "ToolRecoveryPolicy"),
    "RecoveryMode": _Moved("runkernel.kernel", "RecoveryMode"),
    "RetryPolicy": _Moved("runkernel.kernel", "RetryPolicy"),
    "IndeterminateChoice": _Moved("runkernel.kernel", "IndeterminateChoice"),
    "RunSnapshot": _Moved("runkernel.kernel", "RunSnapshot"),
    "Running": _Moved("runkernel.kernel", "Running"),
    "Awaiting": _Moved("runkernel.kernel", "Awaiting"),
    "Ended": _Moved("runkernel.kernel", "Ended"),
    "EndCause": _Moved("runkernel.kernel", "EndCause"),
    "TypedError": _Moved("runkernel.kernel", "TypedError"),
    "ThreadCommit": _Moved("runkernel.kernel", "ThreadCommit"),
    "ThreadHead": _Moved("runkernel.kernel", "ThreadHead"),
    "Event": _Moved("runkernel.kernel", "Event"),
    "Message": _Moved("runkernel.kernel", "Message"),
    "Role": _Moved("runkernel.kernel", "Role"),
    "ToolUse": _Moved("runkernel.kernel", "ToolUse"),
    "ActiveToolBatch": _Moved("runkernel.kernel", "ActiveToolBatch"),
    "ToolCall": _Moved("runkernel.kernel", "ToolCall"),
    "CallRequested": _Moved("runkernel.kernel", "CallRequested"),
    "CallExecuting": _Moved("runkernel.kernel", "CallExecuting"),
    "CallAwaiting": _Moved("runkernel.kernel", "CallAwaiting"),
    "CallCompleted": _Moved("runkernel.kernel", "CallCompleted"),
    "CallIndeterminate": _Moved("runkernel.kernel", "CallIndeterminate"),
    "ToolResult": _Moved("runkernel.kernel", "ToolResult"),
    "ResultKind": _Moved("runkernel.kernel", "ResultKind"),
    "IndeterminateReason": _Moved("runkernel.kernel", "IndeterminateReason"),
    "Wait": _Moved("runkernel.kernel", "Wait"),
    "ResumeTicket": _Moved("runkernel.kernel", "ResumeTicket"),
    "JsonValue": _Moved("runkernel.kernel", "JsonValue"),
    "Staged": _Moved("runkernel.kernel", "Staged"),
    "Delegation": _Moved("runkernel.kernel", "Delegation"),
    "ParentCall": _Moved("runkernel.kernel", "ParentCall"),
    "Activate": _Moved("runkernel.kernel", "Activate"),
    "InferenceResult": _Moved("runkernel.kernel", "InferenceResult"),
    "ProposedCall": _Moved("runkernel.kernel", "ProposedCall"),
    "GateVerdict": _Moved("runkernel.kernel", "GateVerdict"),
    "Allow": _Moved("runkernel.kernel", "Allow"),
    "Block": _Moved("runkernel.kernel", "Block"),
    "Supply": _Moved("runkernel.kernel", "Supply"),
    "RequireWait": _Moved("runkernel.kernel", "RequireWait"),
    "ToolFinished": _Moved("runkernel.kernel", "ToolFinished"),
    "ToolOutput": _Moved("runkernel.kernel", "ToolOutput"),
    "ToolFailure": _Moved("runkernel.kernel", "ToolFailure"),
    "ToolDelegated": _Moved("runkernel.kernel", "ToolDelegated"),
    "ToolScheduled": _Moved("runkernel.kernel", "ToolScheduled"),
    "ToolOutcomeLost": _Moved("runkernel.kernel", "ToolOutcomeLost"),
    "StatusReport": _Moved("runkernel.kernel", "StatusReport"),
    "ResumeCommand": _Moved("runkernel.kernel", "ResumeCommand"),
    "ProvideInput": _Moved("runkernel.kernel", "ProvideInput"),
    "ExternalResult": _Moved("runkernel.kernel", "ExternalResult"),
    "DelegationResult": _Moved("runkernel.kernel", "DelegationResult"),
    "TimerFired": _Moved("runkernel.kernel", "TimerFired"),
    "DeadlinePassed": _Moved("runkernel.kernel", "DeadlinePassed"),
    "EndRequest": _Moved("runkernel.kernel", "EndRequest"),
    "ChildEnded": _Moved("runkernel.kernel", "ChildEnded"),
    "ChildTerminus": _Moved("runkernel.kernel", "ChildTerminus"),
    "Decision": _Moved("runkernel.kernel", "Decision"),
    "Commit": _Moved("runkernel.kernel", "Commit"),
    "RunHook": _Moved("runkernel.kernel", "RunHook"),
    "Hook": _Moved("runkernel.kernel", "Hook"),
    "RequestInference": _Moved("runkernel.kernel", "RequestInference"),
    "RunGate": _Moved("runkernel.kernel", "RunGate"),
    "Execute": _Moved("runkernel.kernel", "Execute"),
    "QueryStatus": _Moved("runkernel.kernel", "QueryStatus"),
    "NotifyWait": _Moved("runkernel.kernel", "NotifyWait"),
    "PublishResults": _Moved("runkernel.kernel", "PublishResults"),
    "DeliverTerminus": _Moved("runkernel.kernel", "DeliverTerminus"),
    "StartChild": _Moved("runkernel.kernel", "StartChild"),
    "CancelChild": _Moved("runkernel.kernel", "CancelChild"),
    # runkernel.adapters.drive.delegations
    "parent_of": _Moved("runkernel.adapters.drive.delegations", "parent_of"),
    "ended_children": _Moved("runkernel.adapters.drive.delegations", "ended_children"),
    "parents_to_wake": _Moved("runkernel.adapters.drive.delegations", "parents_to_wake"),
    # runkernel.adapters.drive.actions
    "Action": _Moved("runkernel.adapters.drive.actions", "Action"),
    "ChildRun": _Moved("runkernel.adapters.drive.actions", "ChildRun"),
    "Answer": _Moved("runkernel.adapters.drive.actions", "Answer"),
    "HistoryView": _Moved("runkernel.adapters.drive.actions", "HistoryView"),
    "DEFAULT_MAX_STEPS": _Moved("runkernel.adapters.drive.actions", "DEFAULT_MAX_STEPS"),
    # runkernel.adapters.drive.inbox
    "submit_resume": _Moved("runkernel.adapters.drive.inbox", "submit_resume"),
    "submit_end": _Moved("runkernel.adapters.drive.inbox", "submit_end"),
    # runkernel.adapters.drive.invocation
    "invocation_scope": _Moved("runkernel.adapters.drive.invocation", "invocation_scope"),
    # runkernel.adapters.stores.memory
    "MemoryStore": _Moved("runkernel.adapters.stores.memory", "MemoryStore"),
    # runkernel.adapters.drive.ports
    "ModelPort": _Moved(_PORTS, "ModelPort"),
    "StreamSink": _Moved(_PORTS, "StreamSink"),
    "Tool": _Moved(_PORTS, "Tool"),
    "Delegate": _Moved(_PORTS, "Delegated"),
    "Schedule": _Moved(_PORTS, "Scheduled"),
    "Lost": _Moved(_PORTS, "Lost"),
    "GatePort": _Moved(_PORTS, "GatePort"),
    "AllowAll": _Moved(_PORTS, "AllowAll"),
    "Observer": _Moved(_PORTS, "Observer"),
    "NullObserver": _Moved(_PORTS, "NullObserver"),
    "IdSource": _Moved(_PORTS, "IdSource"),
    "SecretIds": _Moved(_PORTS, "SecretIds"),
    "HookPort": _Moved(_PORTS, "HookPort"),
    "NoHooks": _Moved(_PORTS, "NoHooks"),
    "Staging": _Moved(_PORTS, "Staging"),
    # runkernel.adapters.stores.postgres.schema
    "init_postgres": _Moved("runkernel.adapters.stores.postgres.schema", "init_postgres"),
    "migrate_postgres": _Moved("runkernel.adapters.stores.postgres.schema", "migrate_postgres"),
    # runkernel.adapters.stores.postgres
    "PostgresStore": _Moved("runkernel.adapters.stores.postgres", "PostgresStore"),
    # runkernel.adapters.drive.runtime
    "RunOutcome": _Moved("runkernel.adapters.drive.runtime", "RunOutcome"),
    # runkernel.adapters.stores.sqlite
    "SqliteStore": _Moved("runkernel.adapters.stores.sqlite", "SqliteStore"),
    # runkernel.adapters.stores.contract
    "Store": _Moved("runkernel.adapters.stores.contract", "Store"),
    "InboxEntry": _Moved("runkernel.adapters.stores.contract", "InboxEntry"),
    "Lease": _Moved("runkernel.adapters.stores.contract", "Lease"),
    "Writer": _Moved("runkernel.adapters.stores.contract", "Writer"),
    # runkernel.adapters.stores.work
    "RunSummary": _Moved("runkernel.adapters.stores.work", "RunSummary"),
    # runkernel.adapters.worker.loop
    "WorkerReport": _Moved("runkernel.adapters.worker.loop", "WorkerReport"),
    # runkernel.adapters.worker.apps
    "PushApp": _Moved("runkernel.adapters.worker.apps", "PushApp"),
    "AsyncPushApp": _Moved("runkernel.adapters.worker.apps", "AsyncPushApp"),
    "load_app": _Moved("runkernel.adapters.worker.apps", "load_app"),
    # runkernel.adapters.drive.lease_keeper
    "LeaseKeeper": _Moved("runkernel.adapters.drive.lease_keeper", "LeaseKeeper"),
    # runkernel.errors
    "DriverError": _Moved("runkernel.errors", "DriverError"),
    "UnknownTool": _Moved("runkernel.errors", "UnknownTool"),
    "MetadataUnsupported": _Moved("runkernel.errors", "MetadataUnsupported"),
    "HostProtocolError": _Moved("runkernel.errors", "HostProtocolError"),
    "BadToolPolicy": _Moved("runkernel.errors", "BadToolPolicy"),
    "BadStoreUrl": _Moved("runkernel.errors", "BadStoreUrl"),
    "UnknownRun": _Moved("runkernel.errors", "UnknownRun"),
    "AppLoadError": _Moved("runkernel.errors", "AppLoadError"),
    "NoInvocation": _Moved("runkernel.errors", "NoInvocation"),
    "RejectedError": _Moved("runkernel.errors", "RejectedError"),
    "IllegalCommit": _Moved("runkernel.errors", "IllegalCommit"),
    "RuntimeProtocolError": _Moved("runkernel.errors", "RuntimeProtocolError"),
    "CommitConflict": _Moved("runkernel.errors", "CommitConflict"),
    "StoreUnavailable": _Moved("runkernel.errors", "StoreUnavailable"),
    "SchemaError": _Moved("runkernel.errors", "SchemaError"),
    "LeaseError": _Moved("runkernel.errors", "LeaseError"),
    "LeaseHeld": _Moved("runkernel.errors", "LeaseHeld"),
    "LeaseLost": _Moved("runkernel.errors", "LeaseLost"),
    "DriverStopped": _Moved("runkernel.errors", "DriverStopped"),
    "KernelBug": _Moved("runkernel.errors", "KernelBug"),
    # runkernel.specs.checker
    "Finding": _Moved("runkernel.specs.checker", "Finding"),
    "Verdict": _Moved("runkernel.specs.checker", "Verdict"),
}

if TYPE_CHECKING:  # the same names, for type checkers: the new object under the old name
    from runkernel.adapters.drive.delegations import (
        ended_children as ended_children,
        parent_of as parent_of,
        parents_to_wake as parents_to_wake,
    )
    from runkernel.adapters.drive.actions import (
        Action as Action,
        Answer as Answer,
        ChildRun as ChildRun,
        DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS,
        HistoryView as HistoryView,
        CallRequest as ModelCall,
        RunCall as ToolInvocation,
    )
    from runkernel.adapters.drive.inbox import (
        submit_end as submit_end,
        submit_resume as submit_resume,
    )
    from runkernel.adapters.drive.invocation import (
        invocation_scope as invocation_scope,
    )
    from runkernel.adapters.stores.memory import (
        MemoryStore as MemoryStore,
    )
    from runkernel.adapters.drive.ports import (
        AllowAll as AllowAll,
        Delegated as Delegate,
        GatePort as GatePort,
        HookPort as HookPort,
        IdSource as IdSource,
        Lost as Lost,
        ModelPort as ModelPort,
        NoHooks as NoHooks,
        NullObserver as NullObserver,
        Observer as Observer,
        Scheduled as Schedule,
        SecretIds as SecretIds,
        Staging as Staging,
        StreamSink as StreamSink,
        Tool as Tool,
    )
    from runkernel.adapters.stores.postgres.schema import (
        init_postgres as init_postgres,
        migrate_postgres as migrate_postgres,
    )
    from runkernel.adapters.stores.postgres import (
        PostgresStore as PostgresStore,
    )
    from runkernel.adapters.drive.runtime import (
        RunOutcome as RunOutcome,
    )
    from runkernel.adapters.stores.sqlite import (
        SqliteStore as SqliteStore,
    )
    from runkernel.adapters.stores.contract import (
        InboxEntry as InboxEntry,
        Lease as Lease,
        Store as Store,
        Writer as Writer,
    )
    from runkernel.adapters.stores.work import (
        RunSummary as RunSummary,
    )
    from runkernel.adapters.worker.loop import (
        WorkerReport as WorkerReport,
    )
    from runkernel.adapters.worker.apps import (
        AsyncPushApp as AsyncPushApp,
        load_app as load_app,
        PushApp as PushApp,
    )
    from runkernel.adapters.drive.lease_keeper import (
        LeaseKeeper as LeaseKeeper,
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
        RejectedError as RejectedError,
        RuntimeProtocolError as RuntimeProtocolError,
        SchemaError as SchemaError,
        StoreUnavailable as StoreUnavailable,
        UnknownRun as UnknownRun,
        UnknownTool as UnknownTool,
    )
    from runkernel.kernel import (
        Accepted as Accepted,
        Activate as Activate,
        ActiveToolBatch as ActiveToolBatch,
        Allow as Allow,
        Awaiting as Awaiting,
        Block as Block,
        CallAwaiting as CallAwaiting,
        CallCompleted as CallCompleted,
        CallExecuting as CallExecuting,
        CallIndeterminate as CallIndeterminate,
        CallRequested as CallRequested,
        CancelChild as CancelChild,
        check_resume as check_resume,
        ChildEnded as ChildEnded,
        ChildTerminus as ChildTerminus,
        Commit as Commit,
        DeadlinePassed as DeadlinePassed,
        decide as decide,
        Decision as Decision,
        Delegation as Delegation,
        DelegationResult as DelegationResult,
        DeliverTerminus as DeliverTerminus,
        EndCause as EndCause,
        Ended as Ended,
        EndRequest as EndRequest,
        Event as Event,
        Execute as Execute,
        ExternalResult as ExternalResult,
        GateVerdict as GateVerdict,
        Hook as Hook,
        IndeterminateChoice as IndeterminateChoice,
        IndeterminateReason as IndeterminateReason,
        InferenceResult as InferenceResult,
        JsonValue as JsonValue,
        Message as Message,
        NO_TICKETS_SEEN as NO_TICKETS_SEEN,
        NotifyWait as NotifyWait,
        ParentCall as ParentCall,
        Policies as Policies,
        ProposedCall as ProposedCall,
        ProvideInput as ProvideInput,
        PublishResults as PublishResults,
        QueryStatus as QueryStatus,
        recover as recover,
        RecoveryDecision as RecoveryDecision,
        RecoveryMode as RecoveryMode,
        RecoveryRow as RecoveryRow,
        Rejection as Rejection,
        RequestInference as RequestInference,
        RequireWait as RequireWait,
        ResultKind as ResultKind,
        ResumeCommand as ResumeCommand,
        ResumeTicket as ResumeTicket,
        RetryPolicy as RetryPolicy,
        Role as Role,
        Rule as Rule,
        RunGate as RunGate,
        RunHook as RunHook,
        Running as Running,
        RunSnapshot as RunSnapshot,
        Staged as Staged,
        StartChild as StartChild,
        StatusReport as StatusReport,
        Supply as Supply,
        ThreadCommit as ThreadCommit,
        ThreadHead as ThreadHead,
        TimerFired as TimerFired,
        ToolCall as ToolCall,
        ToolDelegated as ToolDelegated,
        ToolFailure as ToolFailure,
        ToolFinished as ToolFinished,
        ToolOutcomeLost as ToolOutcomeLost,
        ToolOutput as ToolOutput,
        ToolRecoveryPolicy as ToolRecoveryPolicy,
        ToolResult as ToolResult,
        ToolScheduled as ToolScheduled,
        ToolUse as ToolUse,
        TypedError as TypedError,
        validate_commit as validate_commit,
        Wait as Wait,
    )
    from runkernel.specs.checker import (
        Finding as Finding,
        Verdict as Verdict,
    )
