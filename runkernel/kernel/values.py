"""Closed vocabularies of the design: wait kinds, result kinds, reasons and causes.

Every value is the exact string used by the trace format ``runkernel/1``.
"""

from __future__ import annotations

import enum
from typing import Any, TypeAlias

#: Any JSON value (tool arguments, message content, tool output). The kernel never
#: interprets it; it only compares it for equality.
JsonValue: TypeAlias = Any


class WaitKind(enum.Enum):
    """What an Awaiting call waits for."""

    APPROVAL = "approval"
    INPUT = "input"
    DELEGATION = "delegation"
    SCHEDULED = "scheduled"
    EXTERNAL = "external"


class ResultKind(enum.Enum):
    """How a Completed call got its result."""

    OUTPUT = "output"
    ERROR = "error"
    DENIED = "denied"
    BLOCKED = "blocked"
    SUPPLIED = "supplied"
    EXTERNAL = "external"


class IndeterminateReason(enum.Enum):
    """Why a call's outcome cannot be known."""

    RUN_ENDED = "run_ended"
    OUTCOME_UNKNOWN = "outcome_unknown"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"


class EndCauseKind(enum.Enum):
    """The one cause an Ended Run carries."""

    COMPLETED = "completed"
    STEP_LIMIT = "step_limit"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"


class Role(enum.Enum):
    """Author of a committed message."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


#: End causes by which an Awaiting Run may end (the seed: "cancel, stop or failure").
AWAITING_END_CAUSES = frozenset(
    {EndCauseKind.CANCELLED, EndCauseKind.STOPPED, EndCauseKind.FAILED}
)
