"""What the integration raises, and what it keeps for the run it serves."""

from __future__ import annotations

import contextvars
import warnings
import weakref
from collections.abc import AsyncIterator
from typing import Any

import attrs
from pydantic_ai.messages import AgentStreamEvent

from runkernel import AsyncDriver
from runkernel.adapters.drive.actions import Answer
from runkernel.integrations._common import IntegrationError
from runkernel.kernel import ResumePayload


def cannot_stream(model: Any) -> str | None:
    """Why ``model`` cannot stream a response, or None if it can: a ``FunctionModel``
    without a ``stream_function``, or a model class without ``request_stream`` (a wrapper
    model is asked about the model it wraps)."""
    from pydantic_ai.models import Model
    from pydantic_ai.models.function import FunctionModel

    for _ in range(8):  # wrappers of wrappers; a bound keeps a cycle harmless
        inner = getattr(model, "wrapped", None)
        if not isinstance(inner, Model):
            break
        model = inner
    if isinstance(model, FunctionModel) and model.stream_function is None:
        return "its FunctionModel has no stream_function"
    if isinstance(model, Model) and type(model).request_stream is Model.request_stream:
        return f"{type(model).__name__} does not stream (no request_stream)"
    return None


class DeferredAfterStart(IntegrationError):
    """The host's fault: a tool body raised ``ApprovalRequired`` or ``CallDeferred`` after
    its Executing commit: the Tool-call machine has no Executing→Awaiting edge for it. Declare the
    wait instead."""


class DepsMismatch(IntegrationError):
    """The host's fault: a Run is resumed with ``deps`` of another type than it started
    with (recorded with its activation); its tools would see other deps than before.
    Resume it with deps of the type the message names."""


class SystemPromptNotKept(UserWarning):
    """Warned once per durable agent with ``system_prompt`` parts: they are not committed,
    and a run continued from history is sent none of them. Use ``instructions=``."""




@attrs.frozen
class PickUp:
    """The Run ``resume`` asks the next agent run to pick up: its answers by call id, the
    driver to use (a worker's, holding the lease) or None for a fresh one, and the deps
    type its activation recorded (None: not activated by this integration)."""

    run_id: str
    answers: dict[str, ResumePayload | Answer]
    driver: AsyncDriver | None = None
    deps_type: str | None = None


_PICK_UP: contextvars.ContextVar[PickUp | None] = contextvars.ContextVar("runkernel_pick_up", default=None)

#: Agents already warned that their ``system_prompt`` parts are not kept (once each), by
#: id while they live (an ``Agent`` is not hashable)
_WARNED: set[int] = set()


async def _one(event: AgentStreamEvent) -> AsyncIterator[AgentStreamEvent]:
    yield event


def _warn_if_system_prompt(agent: Any) -> None:
    """Warn once per agent that has ``system_prompt`` parts: they are not committed."""
    parts = [*getattr(agent, "_system_prompts", ()), *getattr(agent, "_system_prompt_functions", ())]
    if parts and id(agent) not in _WARNED:
        _WARNED.add(id(agent))
        weakref.finalize(agent, _WARNED.discard, id(agent))
        warnings.warn(
            SystemPromptNotKept(
                f"agent {getattr(agent, 'name', None) or ''!s}: its system_prompt parts are not committed with the Run,"
                " and Pydantic AI sends none of them when a run continues from history (RunkernelDurability.resume);"
                " give them as instructions=... (sent with every request) instead"
            ),
            stacklevel=3,
        )
