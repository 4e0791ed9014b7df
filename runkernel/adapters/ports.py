"""Deprecated: moved to ``runkernel.adapters.drive.ports``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.ports import (
    AllowAll as AllowAll,
    Clock as Clock,
    Delegated as Delegated,
    Failed as Failed,
    GateAnswer as GateAnswer,
    GatePort as GatePort,
    Hold as Hold,
    HookPort as HookPort,
    IdSource as IdSource,
    InferenceRequest as InferenceRequest,
    Lost as Lost,
    ModelPort as ModelPort,
    ModelReply as ModelReply,
    NoHooks as NoHooks,
    NullObserver as NullObserver,
    Observer as Observer,
    Permit as Permit,
    Provide as Provide,
    Refuse as Refuse,
    Returned as Returned,
    Scheduled as Scheduled,
    SecretIds as SecretIds,
    Staging as Staging,
    StatusReply as StatusReply,
    StreamSink as StreamSink,
    Tool as Tool,
    ToolRegistry as ToolRegistry,
    ToolReply as ToolReply,
    utc_now as utc_now,
)

moved_module(__name__, "runkernel.adapters.drive.ports")
