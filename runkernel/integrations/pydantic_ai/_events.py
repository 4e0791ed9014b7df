"""What the capability does with the run's event stream: best-effort stream checkpoints,
and the host's ``event_stream_handler``."""

from __future__ import annotations

from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import AgentStreamEvent, PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

from runkernel import AsyncDriver, Infer
from runkernel.adapters.drive.actions import Action
from runkernel.integrations.pydantic_ai._context import _one


class StreamListener:
    """``RunkernelDurability``'s event hooks (a mixin: the fields are the capability's)."""

    checkpoint_every: int
    event_stream_handler: EventStreamHandler[Any] | None
    _streamed: list[str]
    _action: Action | None
    _driver: AsyncDriver | None

    @property
    def has_on_event(self) -> bool:
        """Listen to the run's events only to checkpoint a stream or for
        ``event_stream_handler`` (listening makes Pydantic AI stream every model request)."""
        return self.checkpoint_every > 0 or self.event_stream_handler is not None

    def listens_to(self, event: AgentStreamEvent) -> bool:
        """Every event for ``event_stream_handler``; text parts and deltas to checkpoint."""
        if self.event_stream_handler is not None:
            return True
        return self.checkpoint_every > 0 and isinstance(event, (PartStartEvent, PartDeltaEvent))

    async def on_event(self, ctx: Any, *, event: AgentStreamEvent) -> None:
        """Every ``checkpoint_every`` text deltas of a streamed response, save the text so
        far as the step's best-effort checkpoint (``Infer.partial`` after a crash; the
        model is asked again all the same). Every event goes to ``event_stream_handler``."""
        if self.event_stream_handler is not None:
            await self.event_stream_handler(ctx, _one(event))
        if self.checkpoint_every <= 0:
            return
        if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
            self._streamed.append(event.part.content)
        elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
            self._streamed.append(event.delta.content_delta)
        else:
            return
        due = len(self._streamed) % self.checkpoint_every == 0
        if due and isinstance(self._action, Infer) and self._driver is not None:
            await self._driver.checkpoint({"text": "".join(self._streamed)})
