"""Pure translations between runkernel's committed facts and Pydantic AI's values: a
committed result as the tool return Pydantic AI shows, ``DeferredToolResults`` as resume
payloads, committed messages as Pydantic AI's message history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, assert_never

from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.exceptions import ModelRetry, ToolFailed, ToolRetryError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.toolsets import AbstractToolset, ApprovalRequiredToolset, WrapperToolset
from pydantic_core import to_jsonable_python

from runkernel import Approve, Deny
from runkernel.adapters.drive.actions import Answer
from runkernel.integrations._common import IntegrationError
from runkernel.kernel import (
    CallCompleted, CallIndeterminate, DelegationResult, ExternalResult, JsonValue, Message, ProvideInput, ResultKind,
    ResumePayload, Role, TimerFired, ToolCall, tool_result_content,
)


def _approval_functions(toolset: AbstractToolset[Any], leaf: AbstractToolset[Any]) -> list[Callable[..., bool]]:
    """The approval functions of every ``ApprovalRequiredToolset`` that wraps ``leaf``."""
    if toolset is leaf:
        return []
    own = [toolset.approval_required_func] if isinstance(toolset, ApprovalRequiredToolset) else []
    children: Sequence[AbstractToolset[Any]] = (
        [toolset.wrapped] if isinstance(toolset, WrapperToolset) else getattr(toolset, "toolsets", [])
    )
    for child in children:
        if child is leaf or _contains(child, leaf):
            return own + _approval_functions(child, leaf)
    return []


def _contains(toolset: AbstractToolset[Any], leaf: AbstractToolset[Any]) -> bool:
    found: list[bool] = []
    toolset.apply(lambda each: found.append(each is leaf))
    return any(found)


def _error_value(error: Exception) -> JsonValue:
    if isinstance(error, ToolRetryError):
        return {"type": "ModelRetry", "message": str(error.tool_retry.content)}
    if isinstance(error, ModelRetry):
        return {"type": "ModelRetry", "message": error.message}
    return {"type": "ToolFailed", "message": str(error)}


def _shown(call: ToolCall) -> Any:
    """A committed terminal result as the tool's return (or its retry/failure) to Pydantic AI."""
    status = call.status
    if isinstance(status, CallIndeterminate):
        return tool_result_content(status, call.operation_id)  # what the model sees of it
    assert isinstance(status, CallCompleted)
    value, kind = status.result.value, status.result.kind
    match kind:
        case ResultKind.ERROR:
            message = value.get("message") if isinstance(value, dict) else value
            if isinstance(value, dict) and value.get("type") == "ToolFailed":
                raise ToolFailed(str(message))
            raise ModelRetry(str(message))
        case ResultKind.DENIED:
            return value if value is not None else ToolDenied().message
        case ResultKind.OUTPUT | ResultKind.BLOCKED | ResultKind.SUPPLIED | ResultKind.EXTERNAL:
            return value
        case _:
            assert_never(kind)


def _deferred_answer(call: ToolCall) -> Any:
    status = call.status
    if isinstance(status, CallCompleted) and status.result.kind is ResultKind.DENIED:
        value = status.result.value
        return ToolDenied(value if isinstance(value, str) else ToolDenied().message)
    return ToolApproved()  # it ran (or may have) after its approval: wrap_tool_execute shows the result


def _payloads(results: DeferredToolResults | None) -> dict[str, ResumePayload | Answer]:
    """Each answer as the payload its ticket will get. Answers runkernel cannot commit as
    given are refused here, before anything is applied."""
    if results is None:
        return {}
    payloads: dict[str, ResumePayload | Answer] = {}
    for call_id, answer in results.to_tool_call_results().items():
        if isinstance(answer, ToolApproved) and answer.override_args is not None:
            raise IntegrationError(
                f"call {call_id!r}: an approval cannot change the arguments committed with the batch;"
                " deny it and let the model call again"
            )
        if isinstance(answer, (ModelRetry, ToolFailed, RetryPromptPart)):
            raise IntegrationError(f"call {call_id!r}: answer a deferred call with a value, not {type(answer).__name__}")
        if isinstance(answer, ToolApproved):
            payloads[call_id] = Approve()
        elif isinstance(answer, ToolDenied):
            payloads[call_id] = Deny(answer.message)
        else:
            payloads[call_id] = Answer(to_jsonable_python(getattr(answer, "return_value", answer)))
    return payloads


def _answer_of(payload: ResumePayload | Answer) -> Any:
    match payload:
        case Approve():
            return ToolApproved()
        case Deny():
            return ToolDenied(payload.reason if isinstance(payload.reason, str) else ToolDenied().message)
        case ProvideInput() | ExternalResult() | DelegationResult() | Answer():
            return payload.value
        case TimerFired():
            return None
        case _:
            assert_never(payload)


def _deps_type(deps: Any) -> str:
    """A deps value's type as recorded with a Run's activation (``module.QualName``)."""
    kind = type(deps)
    return f"{kind.__module__}.{kind.__qualname__}"


def _recorded_deps_type(messages: Sequence[Message], run_id: str) -> str | None:
    """The deps type the activation of ``run_id`` recorded on its user prompt, if any
    (a Run started by ``runkernel start`` records none)."""
    for message in reversed(messages):
        metadata = getattr(message, "metadata", None)
        recorded = metadata.get("runkernel") if message.role is Role.USER and isinstance(metadata, dict) else None
        if isinstance(recorded, dict) and recorded.get("run_id") == run_id:
            deps_type = recorded.get("deps_type")
            return deps_type if isinstance(deps_type, str) else None
    return None


def to_model_messages(messages: Sequence[Message]) -> list[ModelMessage]:
    """Rebuild Pydantic AI's history from committed messages: an assistant message's
    metadata is its ``ModelResponse`` verbatim; without it, text and tool calls."""
    history: list[ModelMessage] = []
    returns: list[ModelRequestPart] = []
    names: dict[str, str] = {}
    for message in messages:
        if message.role is Role.TOOL:
            assert message.call_id is not None
            returns.append(_return_part(names.get(message.call_id, "unknown"), message.call_id, message.content))
            continue
        if returns:
            history.append(ModelRequest(parts=returns))
            returns = []
        if message.role is Role.USER:
            history.append(ModelRequest(parts=[UserPromptPart(message.content)]))
            continue
        names.update({use.call_id: use.tool for use in message.tool_calls or ()})
        metadata = getattr(message, "metadata", None)
        if metadata is not None:
            history.extend(ModelMessagesTypeAdapter.validate_python([metadata]))
            continue
        parts: list[Any] = [TextPart(message.content)] if isinstance(message.content, str) else []
        parts += [ToolCallPart(use.tool, use.arguments, use.call_id) for use in message.tool_calls or ()]
        history.append(ModelResponse(parts=parts))
    if returns:
        history.append(ModelRequest(parts=returns))
    return history


def _return_part(tool: str, call_id: str, content: JsonValue) -> ModelRequestPart:
    body = content if isinstance(content, dict) else {}
    kind, value = body.get("kind"), body.get("value")
    if kind == ResultKind.ERROR.value and isinstance(value, dict) and value.get("type") == "ModelRetry":
        return ToolReturnPart(tool, str(value.get("message")), call_id, outcome="retried")
    if kind == ResultKind.ERROR.value:
        message = value.get("message") if isinstance(value, dict) else value
        return ToolReturnPart(tool, str(message), call_id, outcome="failed")
    if kind == ResultKind.DENIED.value:
        return ToolReturnPart(tool, value if isinstance(value, str) else ToolDenied().message, call_id, outcome="denied")
    if kind == "indeterminate" or "indeterminate" in body:  # the whole body: reason and operation id
        return ToolReturnPart(tool, content, call_id)
    return ToolReturnPart(tool, value if kind is not None else content, call_id)
