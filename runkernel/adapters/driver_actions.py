"""Deprecated: moved to ``runkernel.adapters.drive.actions``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.actions import (
    Action as Action,
    Answer as Answer,
    CallRequest as CallRequest,
    CheckStatus as CheckStatus,
    ChildRun as ChildRun,
    ChildrenRunning as ChildrenRunning,
    DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS,
    Done as Done,
    DriverError as DriverError,
    DriverStopped as DriverStopped,
    HistoryView as HistoryView,
    HostProtocolError as HostProtocolError,
    Infer as Infer,
    MetadataUnsupported as MetadataUnsupported,
    RunCall as RunCall,
    UnknownTool as UnknownTool,
    WaitFor as WaitFor,
)

moved_module(__name__, "runkernel.adapters.drive.actions")
