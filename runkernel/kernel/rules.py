"""Named rules and the typed rejection that cites them.

A rejection changes nothing: ``decide`` and ``validate_commit`` return it instead of a
new state, and it says which rule was broken and why, the way h11 says "can't handle
X when state=Y".
"""

from __future__ import annotations

import enum

from attrs import frozen

from runkernel.errors import RejectedError as RejectedError


class Rule(enum.Enum):
    """Every rule a commit or an input can break. Values are stable ids for reports."""

    # commit log (I1-I4, I13)
    IDENTITY = "identity"
    VERSION = "version-contiguous"
    FIRST_COMMIT = "first-commit-running"
    ONE_ACTIVE_RUN = "one-active-run"
    AFTER_ENDED = "nothing-after-ended"
    APP_VERSION = "app-version-on-activation"
    STEP = "step-counts-inference"
    RUN_EDGE = "run-edge"
    TICKET_SHAPE = "ticket-matches-wait"
    TICKET_REUSED = "ticket-never-reused"
    RESUME = "resume-matches-ticket"
    RESUME_PAYLOAD = "resume-payload-fits-wait"
    RESUME_DIGEST = "resume-digest-is-jcs-sha256"
    RESUME_EDGE = "resume-edge-per-payload"
    AWAITING_END = "awaiting-ends-by-cancel-stop-failure"
    CALL_EDGE = "call-edge"
    EDGE_CONDITION = "edge-condition"
    ATTEMPT = "attempt-increments-by-one"
    EXECUTING_FIRST = "attempt-starts-by-executing"
    BATCH_NEW = "batch-complete-and-requested"
    BATCH_IDENTITY = "batch-identity-stable"
    CALL_ORDER = "calls-one-at-a-time-in-order"
    INFERENCE_OPEN_BATCH = "no-inference-with-open-batch"
    FINALIZE = "finalize-when-all-terminal"
    PUBLISH = "publish-one-result-per-call"
    RUN_END_CLOSES = "run-end-closes-calls"
    TERMINAL_IMMUTABLE = "terminal-result-immutable"
    CALL_WAITS_WITH_RUN = "call-waits-with-run"
    FORK = "fork-carries-source-state"
    # delegations (I15)
    DELEGATION_FIXED = "delegation-child-fixed"
    CHILD_ONCE = "child-activated-once"
    CHILD_TERMINUS = "result-is-child-terminus"
    GROUP_GATE = "group-gated-before-it-starts"
    # inputs to decide (I14 and the driver's protocol)
    RUN_NOT_AWAITING = "run-not-awaiting"
    TICKET_MISMATCH = "ticket-mismatch"
    WAIT_KIND_MISMATCH = "wait-kind-mismatch"
    PAYLOAD_TYPE = "payload-type"
    ALREADY_APPLIED = "already-applied"
    STALE_COMMAND = "stale-command"
    RUN_ENDED = "run-ended"
    WRONG_RUN = "wrong-run"
    UNEXPECTED_INPUT = "unexpected-input"
    NOT_EXPIRED = "wait-not-expired"
    # what a store refuses before judging: a trace cannot hold it (not JSON, exit 2)
    JSON_VALUE = "values-are-json"


@frozen
class Rejection:
    """A typed refusal: nothing was committed and no state changed."""

    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"{self.rule.value}: {self.message}"
