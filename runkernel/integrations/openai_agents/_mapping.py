"""Pure translations between runkernel's committed facts and the OpenAI Agents SDK's
values: a model response as a step's content, calls and metadata; committed messages as
the SDK's input items; a committed result as the tool output the SDK shows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, assert_never

from agents import ModelResponse, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputItem, ResponseOutputMessage, ResponseOutputText
from pydantic import TypeAdapter

from runkernel import CallRequest
from runkernel.kernel import CallCompleted, CallIndeterminate, JsonValue, Message, ResultKind, Role, ToolCall, tool_result_content

_OUTPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)

#: The tool output a denied call shows the model when the deny gave no reason.
DENIED = "Tool execution was not approved."


def response_text(response: ModelResponse) -> str | None:
    """The text of the response's assistant messages (None when it has none)."""
    texts = [
        part.text
        for item in response.output if isinstance(item, ResponseOutputMessage)
        for part in item.content if isinstance(part, ResponseOutputText)
    ]
    return "".join(texts) if texts else None


def function_calls(response: ModelResponse) -> list[ResponseFunctionToolCall]:
    """The response's function calls (function tools and handoffs), in the model's order."""
    return [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]


def arguments_of(call: ResponseFunctionToolCall) -> JsonValue:
    """A call's arguments as JSON (the raw string when it is not JSON: the tool refuses it)."""
    try:
        parsed: JsonValue = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        return call.arguments
    return parsed


def step_of(response: ModelResponse, agent: str, calls: Sequence[ResponseFunctionToolCall]) -> tuple[JsonValue, list[CallRequest], JsonValue]:
    """One inference step: content (the response's text), the ordered batch (``calls``,
    already in runkernel's order) and the metadata kept verbatim (the answering agent and
    the response's output items)."""
    requests = [CallRequest(c.name, arguments_of(c), call_id=c.call_id) for c in calls]
    output = [item.model_dump(mode="json", exclude_unset=True) for item in response.output]
    return response_text(response), requests, {"agent": agent, "output": output}


def replayed_response(metadata: JsonValue) -> ModelResponse:
    """A committed response, handed to the SDK again (no model call, no usage)."""
    assert isinstance(metadata, dict) and isinstance(metadata.get("output"), list)
    return ModelResponse(output=[_OUTPUT_ITEM.validate_python(item) for item in metadata["output"]], usage=Usage(), response_id=None)


def input_items(messages: Sequence[Message]) -> list[Any]:
    """Committed messages as the SDK's input items: user messages, each response's
    output items verbatim, each tool result as a ``function_call_output``."""
    items: list[Any] = []
    for message in messages:
        if message.role is Role.USER:
            content = message.content if isinstance(message.content, str) else json.dumps(message.content)
            items.append({"role": "user", "content": content})
        elif message.role is Role.TOOL:
            items.append({"type": "function_call_output", "call_id": message.call_id, "output": _output_text(message.content)})
        elif isinstance(metadata := getattr(message, "metadata", None), dict) and "output" in metadata:
            items.extend(metadata["output"])
        elif isinstance(message.content, str):
            items.append({"role": "assistant", "content": message.content})
    return items


def _output_text(content: JsonValue) -> str:
    body = content if isinstance(content, dict) else {}
    kind, value = body.get("kind"), body.get("value")
    if kind == ResultKind.DENIED.value:
        return value if isinstance(value, str) else DENIED
    if kind == "indeterminate" or kind is None:
        return json.dumps(content)
    if kind == ResultKind.ERROR.value and isinstance(value, dict) and "message" in value:
        return str(value["message"])
    return value if isinstance(value, str) else json.dumps(value)


def shown(call: ToolCall) -> Any:
    """A committed terminal result as the tool's output to the SDK."""
    status = call.status
    if isinstance(status, CallIndeterminate):
        return json.dumps(tool_result_content(status, call.operation_id))  # the model sees the operation id
    assert isinstance(status, CallCompleted)
    kind = status.result.kind
    match kind:
        case ResultKind.OUTPUT:
            return status.result.value  # as the tool returned it (JSON): the SDK formats it as the first time
        case ResultKind.ERROR | ResultKind.DENIED | ResultKind.BLOCKED | ResultKind.SUPPLIED | ResultKind.EXTERNAL:
            return _output_text(tool_result_content(status, call.operation_id))
        case _:
            assert_never(kind)


def last_response(messages: Sequence[Message]) -> int | None:
    """The index of the last assistant message that keeps its response (None if none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is Role.ASSISTANT and isinstance(getattr(message, "metadata", None), dict):
            return index
    return None
