"""Pydantic AI's failures in runkernel's terms: which model errors are transient (worth
another attempt of the same model call, with the interpreter's capped backoff), and what
a Run that ended under the agent tells its host to do."""

from __future__ import annotations

from pydantic_ai.exceptions import (
    FallbackExceptionGroup,
    ModelConnectionError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelServerError,
    ModelUnavailableError,
)

from runkernel.adapters.drive.model_errors import transient_model_error
from runkernel.kernel import EndCause, EndCauseKind

#: Pydantic AI's own classified model errors that another attempt may cure: the request
#: did not reach the provider or timed out, a rate limit, an overloaded, unavailable or
#: failing server. Quota, authentication, bad requests and context-window errors are not.
_TRANSIENT_TYPES = (ModelConnectionError, ModelRequestTimeout, ModelRateLimitError, ModelServerError, ModelUnavailableError)


def pydantic_ai_transient(error: BaseException) -> bool:
    """The capability's default ``transient`` predicate: runkernel's
    (``transient_model_error``: ``TimeoutError``, ``ConnectionError``, an HTTP
    ``status_code`` of 408, 409, 429 or 5xx, so a ``ModelHTTPError(503)`` is transient and
    a ``ModelHTTPError(400)`` is not), Pydantic AI's connection, timeout, rate-limit,
    server and unavailable errors, and a ``FallbackModel``'s group when every model in it
    failed transiently."""
    if isinstance(error, FallbackExceptionGroup):
        return all(pydantic_ai_transient(each) for each in error.exceptions)
    return isinstance(error, _TRANSIENT_TYPES) or transient_model_error(error)


def ended_message(run_id: str, cause: EndCause, operation_ids: tuple[str, ...]) -> str:
    """What ``RunEnded`` says: how the Run ended and what the host can do about it."""
    kind = cause.kind
    said = f"run {run_id!r} ended {kind.value}"
    if kind is EndCauseKind.FAILED and cause.error is not None:
        said += f" ({cause.error.type}: {cause.error.message})"
    if kind is EndCauseKind.OUTCOME_UNKNOWN:
        return f"{said}: nobody knows whether operation ids {list(operation_ids)} took effect; reconcile them downstream"
    advice = {
        EndCauseKind.COMPLETED: "it has its final answer",
        EndCauseKind.STEP_LIMIT: "it reached max_steps; raise RunkernelDurability(max_steps=...) for longer runs",
        EndCauseKind.CANCELLED: "it was cancelled (runkernel cancel, or its client)",
        EndCauseKind.STOPPED: "it was stopped",
        EndCauseKind.FAILED: "its failure is committed",
    }[kind]
    unknown = f"; reconcile operation ids {list(operation_ids)} downstream" if operation_ids else ""
    return f"{said}: {advice}{unknown}; an Ended Run is never resumed: start a new agent.run in the conversation"
