"""The pure core of runkernel: typed state, inputs, effects, ``decide``, commit
validation and ``recover``. No I/O, no clock, no randomness: ids, times and outcomes
arrive as inputs, and everything that touches the world is an effect.

This is the kernel's vocabulary, the names a runtime of its own (or a test) needs to
feed the kernel and carry out its effects: ``decide(state, input)`` returns a
``Decision`` (the next state and the effects, in order) or a ``Rejection``;
``validate_commit`` is the judge every store and ``check-trace`` use; ``recover`` says
what to do with a Run found after a crash. A host that lets runkernel's drivers carry
out the effects needs little of it: ``runkernel`` exports the host's vocabulary (its
actions, answers and ports), and the drivers translate. Some names are the kernel's own
words for what a host says in its vocabulary: the gate's ``Permit`` / ``Refuse`` /
``Provide`` / ``Hold`` are the kernel's ``Allow`` / ``Block`` / ``Supply`` /
``RequireWait``; a tool's ``Returned`` / ``Failed`` / ``Lost`` / ``Scheduled`` /
``Delegated`` (a push host's ``call_returned`` ...) are ``ToolOutput`` / ``ToolFailure`` /
``ToolOutcomeLost`` / ``ToolScheduled`` / ``ToolDelegated``; a ``RunCall`` is what the
driver hands out for an ``Execute`` effect, and a ``CallRequest`` becomes a
``ProposedCall``.

``SECTIONS`` groups the names (``docs/api.md`` follows it); ``__all__`` is every name in
it (a test keeps the two in step).
"""

from runkernel.kernel.decide import (
    check_resume,
    decide,
    KernelBug,
)
from runkernel.kernel.edges import (
    CALL_EDGES,
    call_phase,
    CALL_TABLE,
    CallEdge,
    CallPhase,
    RUN_EDGES,
    run_phase,
    RUN_TABLE,
    RunEdge,
    RunPhase,
)
from runkernel.kernel.effects_plan import (
    tool_result_content,
)
from runkernel.kernel.fork import (
    fork_commit,
    fork_point,
    ForkIds,
    ForkPoint,
    ForkRefusal,
    ForkRefusalKind,
)
from runkernel.kernel.history import (
    commit_keys,
    History,
    HistoryKeys,
    MutableHistory,
    NO_HISTORY,
    RunHistory,
)
from runkernel.kernel.policies import (
    IndeterminateChoice,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    CancelChild,
    ChildEnded,
    ChildTerminus,
    Commit,
    DeadlinePassed,
    Decision,
    DelegationResult,
    DeliverTerminus,
    Deny,
    Effect,
    EndRequest,
    Execute,
    ExternalResult,
    GateOutcome,
    GateVerdict,
    Hook,
    InferenceResult,
    Input,
    NotifyWait,
    OperationStatus,
    ProposedCall,
    ProvideInput,
    PublishResults,
    QueryStatus,
    RequestInference,
    RequireWait,
    ResumeCommand,
    ResumePayload,
    RunGate,
    RunHook,
    StartChild,
    StatusReport,
    Supply,
    TimerFired,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.recover import (
    recover,
    RECOVERY_TABLE,
    RecoveryDecision,
    RecoveryRow,
)
from runkernel.kernel.rules import (
    RejectedError,
    Rejection,
    Rule,
)
from runkernel.kernel.state import (
    ActiveToolBatch,
    AppliedResume,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Delegation,
    EndCause,
    Ended,
    Event,
    Message,
    ForkedFrom,
    ParentCall,
    ResumeTicket,
    RunDisposition,
    Running,
    RunSnapshot,
    RunState,
    Staged,
    ThreadCommit,
    ThreadHead,
    ToolCall,
    ToolResult,
    ToolUse,
    TypedError,
    Wait,
)
from runkernel.kernel.validate import (
    Accepted,
    NO_TICKETS_SEEN,
    TicketSeen,
    validate_commit,
)
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    JsonValue,
    ResultKind,
    Role,
    WaitKind,
)

#: The kernel's names by section: (title, names). ``docs/api.md`` documents them in this
#: order.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        'Deciding, validating, recovering',
        (
            'decide', 'recover', 'validate_commit', 'check_resume', 'tool_result_content',
            'Decision', 'Accepted', 'Rejection', 'Rule', 'RecoveryDecision', 'RecoveryRow',
            'RECOVERY_TABLE', 'NO_TICKETS_SEEN', 'TicketSeen',
        ),
    ),
    (
        'Policies',
        (
            'Policies', 'ToolPolicy', 'ToolRecoveryPolicy', 'RecoveryMode', 'RetryPolicy',
            'IndeterminateChoice',
        ),
    ),
    (
        'Committed state: the Run',
        (
            'RunSnapshot', 'RunState', 'Running', 'Awaiting', 'Ended', 'RunDisposition',
            'EndCause', 'TypedError', 'ResumeTicket', 'Wait', 'Staged', 'Delegation', 'ParentCall',
            'AppliedResume',
        ),
    ),
    (
        'Committed state: the Thread and its commits',
        (
            'ThreadCommit', 'ThreadHead', 'Message', 'ToolUse', 'Event',
        ),
    ),
    (
        'Committed state: tool batches and calls',
        (
            'ActiveToolBatch', 'ToolCall', 'CallStatus', 'CallRequested', 'CallExecuting',
            'CallAwaiting', 'CallCompleted', 'CallIndeterminate', 'ToolResult',
        ),
    ),
    (
        'Values',
        (
            'JsonValue', 'Role', 'EndCauseKind', 'WaitKind', 'ResultKind', 'IndeterminateReason',
        ),
    ),
    (
        'Inputs (what happened)',
        (
            'Input', 'Activate', 'InferenceResult', 'ProposedCall', 'GateVerdict', 'GateOutcome',
            'Allow', 'Block', 'Supply', 'RequireWait', 'ToolFinished', 'ToolOutcome', 'ToolOutput',
            'ToolFailure', 'ToolDelegated', 'ToolScheduled', 'ToolOutcomeLost', 'StatusReport',
            'OperationStatus', 'ResumeCommand', 'ResumePayload', 'Approve', 'Deny', 'ProvideInput',
            'ExternalResult', 'DelegationResult', 'TimerFired', 'DeadlinePassed', 'EndRequest',
            'ChildEnded', 'ChildTerminus',
        ),
    ),
    (
        'Effects (what to do)',
        (
            'Effect', 'Commit', 'RunHook', 'Hook', 'RequestInference', 'RunGate', 'Execute',
            'QueryStatus', 'NotifyWait', 'PublishResults', 'DeliverTerminus', 'StartChild',
            'CancelChild',
        ),
    ),
    (
        'History a snapshot does not hold',
        (
            'History', 'RunHistory', 'MutableHistory', 'HistoryKeys', 'commit_keys', 'NO_HISTORY',
        ),
    ),
    (
        'The two machines, declared once',
        (
            'RunPhase', 'CallPhase', 'RunEdge', 'CallEdge', 'RUN_TABLE', 'CALL_TABLE', 'RUN_EDGES',
            'CALL_EDGES', 'run_phase', 'call_phase',
        ),
    ),
    (
        'Forks',
        (
            'fork_point', 'fork_commit', 'ForkPoint', 'ForkIds', 'ForkRefusal', 'ForkRefusalKind',
            'ForkedFrom',
        ),
    ),
    (
        'Errors the kernel raises (also in runkernel.errors)',
        (
            'RejectedError', 'KernelBug',
        ),
    ),
)

__all__ = [
    "decide",
    "recover",
    "validate_commit",
    "check_resume",
    "tool_result_content",
    "Decision",
    "Accepted",
    "Rejection",
    "Rule",
    "RecoveryDecision",
    "RecoveryRow",
    "RECOVERY_TABLE",
    "NO_TICKETS_SEEN",
    "TicketSeen",
    "Policies",
    "ToolPolicy",
    "ToolRecoveryPolicy",
    "RecoveryMode",
    "RetryPolicy",
    "IndeterminateChoice",
    "RunSnapshot",
    "RunState",
    "Running",
    "Awaiting",
    "Ended",
    "RunDisposition",
    "EndCause",
    "TypedError",
    "ResumeTicket",
    "Wait",
    "Staged",
    "Delegation",
    "ParentCall",
    "AppliedResume",
    "ThreadCommit",
    "ThreadHead",
    "Message",
    "ToolUse",
    "Event",
    "ActiveToolBatch",
    "ToolCall",
    "CallStatus",
    "CallRequested",
    "CallExecuting",
    "CallAwaiting",
    "CallCompleted",
    "CallIndeterminate",
    "ToolResult",
    "JsonValue",
    "Role",
    "EndCauseKind",
    "WaitKind",
    "ResultKind",
    "IndeterminateReason",
    "Input",
    "Activate",
    "InferenceResult",
    "ProposedCall",
    "GateVerdict",
    "GateOutcome",
    "Allow",
    "Block",
    "Supply",
    "RequireWait",
    "ToolFinished",
    "ToolOutcome",
    "ToolOutput",
    "ToolFailure",
    "ToolDelegated",
    "ToolScheduled",
    "ToolOutcomeLost",
    "StatusReport",
    "OperationStatus",
    "ResumeCommand",
    "ResumePayload",
    "Approve",
    "Deny",
    "ProvideInput",
    "ExternalResult",
    "DelegationResult",
    "TimerFired",
    "DeadlinePassed",
    "EndRequest",
    "ChildEnded",
    "ChildTerminus",
    "Effect",
    "Commit",
    "RunHook",
    "Hook",
    "RequestInference",
    "RunGate",
    "Execute",
    "QueryStatus",
    "NotifyWait",
    "PublishResults",
    "DeliverTerminus",
    "StartChild",
    "CancelChild",
    "History",
    "RunHistory",
    "MutableHistory",
    "HistoryKeys",
    "commit_keys",
    "NO_HISTORY",
    "RunPhase",
    "CallPhase",
    "RunEdge",
    "CallEdge",
    "RUN_TABLE",
    "CALL_TABLE",
    "RUN_EDGES",
    "CALL_EDGES",
    "run_phase",
    "call_phase",
    "fork_point",
    "fork_commit",
    "ForkPoint",
    "ForkIds",
    "ForkRefusal",
    "ForkRefusalKind",
    "ForkedFrom",
    "RejectedError",
    "KernelBug",
]
