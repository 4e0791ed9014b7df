"""Deprecated: moved to ``runkernel.adapters.drive.runtime``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.runtime import (
    ALREADY_COMMITTED as ALREADY_COMMITTED,
    Acknowledged as Acknowledged,
    CheckpointLost as CheckpointLost,
    CommandSettled as CommandSettled,
    CommitRetried as CommitRetried,
    Drive as Drive,
    MAX_STATUS_POLLS as MAX_STATUS_POLLS,
    ModelFailed as ModelFailed,
    Recovered as Recovered,
    RunOutcome as RunOutcome,
    Runtime as Runtime,
    RuntimeEvent as RuntimeEvent,
    RuntimeProtocolError as RuntimeProtocolError,
)

moved_module(__name__, "runkernel.adapters.drive.runtime")
