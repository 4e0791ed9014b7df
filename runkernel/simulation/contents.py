"""Committed messages against what the model and the tools really answered.

The structural checks (I1-I14) say a history is legal; these say it is true: every
committed assistant message is a complete reply the model gave for that Run and step
(its text and its tool calls), every tool result that claims a tool's output or error
carries a value that tool (or its status) really answered for that operation, and no
committed message holds anything from a stream checkpoint (I10), whatever it contains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runkernel.adapters.ports import ModelReply
from runkernel.adapters.serial import dumps
from runkernel.kernel.codec import message_to_json
from runkernel.kernel.state import Message, ThreadCommit
from runkernel.kernel.values import JsonValue, ResultKind, Role
from runkernel.simulation.actors import CHECKPOINT_MARK, World

#: Result kinds whose value must be one a tool answered (the others are made by the
#: kernel or come with a resume: denied, blocked, supplied, external).
_ANSWERED_KINDS = (ResultKind.OUTPUT.value, ResultKind.ERROR.value)


def check_contents(world: World, logs: Mapping[str, Iterable[ThreadCommit]]) -> list[str]:
    """Every committed message that does not match what was really answered."""
    problems: list[str] = []
    for thread_id, log in logs.items():
        commits = list(log)
        operations = {
            call.call_id: call.operation_id for c in commits if c.batch is not None for call in c.batch.calls
        }
        for commit in commits:
            where = f"{thread_id} v{commit.version} (run {commit.run_id}, step {commit.step})"
            for message in commit.messages:
                if CHECKPOINT_MARK in dumps(message_to_json(message)):
                    problems.append(f"I10 {where}: a stream checkpoint's content reached a committed message")
                if message.role is Role.ASSISTANT:
                    replies = world.replies.get((commit.run_id, commit.step), [])
                    if not any(_is_reply(message, reply) for reply in replies):
                        problems.append(f"content {where}: an assistant message the model never replied")
                elif message.role is Role.TOOL:
                    problems += _tool_result(world, where, message, operations)
    return problems


def _is_reply(message: Message, reply: ModelReply) -> bool:
    # a call the model did not name gets its id from the runtime's ids port
    named = all(c.call_id is not None for c in reply.calls)
    uses: tuple[tuple[str | None, str, JsonValue], ...] = tuple(
        (u.call_id if named else None, u.tool, u.arguments) for u in message.tool_calls or ()
    )
    calls = tuple((c.call_id, c.tool, c.arguments) for c in reply.calls)
    return message.content == reply.content and uses == calls


def _tool_result(world: World, where: str, message: Message, operations: Mapping[str, str]) -> list[str]:
    content = message.content
    if not isinstance(content, dict) or content.get("kind") not in _ANSWERED_KINDS:
        return []
    operation_id = operations.get(message.call_id or "")
    answered = world.answered.get(operation_id or "", [])
    if content.get("value") in answered:
        return []
    return [
        f"content {where}: the {content.get('kind')} of call {message.call_id} is not what its tool "
        f"answered for operation {operation_id}"
    ]
