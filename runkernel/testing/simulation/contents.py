"""Committed messages against what the model and the tools really answered.

The structural checks (I1-I14) say a history is legal; these say it is true: every
committed assistant message is a complete reply the model gave for that Run and step
(its text and its tool calls), every tool result that claims a tool's output or error
carries a value that tool (or its status) really answered for that operation, and no
committed message holds anything from a stream checkpoint (I10), whatever it contains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runkernel.adapters.drive.ports import ModelReply
from runkernel.adapters.stores.serial import dumps
from runkernel.kernel.codec import message_to_json
from runkernel.kernel.delegation import terminus
from runkernel.kernel.state import Ended, Message, ThreadCommit
from runkernel.kernel.values import JsonValue, ResultKind, Role
from runkernel.testing.scripted import CHECKPOINT_MARK, World

#: Result kinds whose value must be one a tool answered (the others are made by the
#: kernel or come with a resume: denied, blocked, supplied, external).
_ANSWERED_KINDS = (ResultKind.OUTPUT.value, ResultKind.ERROR.value)


def check_contents(world: World, logs: Mapping[str, Iterable[ThreadCommit]]) -> list[str]:
    """Every committed message that does not match what was really answered."""
    problems: list[str] = []
    termini = _termini(logs)
    for thread_id, log in logs.items():
        commits = list(log)
        operations = {
            call.call_id: call.operation_id for c in commits if c.batch is not None for call in c.batch.calls
        }
        children = {
            call.call_id: call.delegation.run_id
            for c in commits if c.batch is not None for call in c.batch.calls
            if call.delegation is not None and call.delegation.concurrent
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
                elif message.role is Role.TOOL and message.call_id in children:
                    problems += _child_result(where, message, termini.get(children[message.call_id]))
                elif message.role is Role.TOOL:
                    problems += _tool_result(world, where, message, operations)
    return problems


def _termini(logs: Mapping[str, Iterable[ThreadCommit]]) -> dict[str, JsonValue]:
    """The terminus of every Ended Run in ``logs``, by Run id, from its commits."""
    found: dict[str, JsonValue] = {}
    finals: dict[str, JsonValue] = {}
    for thread_id, log in logs.items():
        for commit in log:
            for message in commit.messages:
                if message.role is Role.ASSISTANT:
                    finals[commit.run_id] = message.content
            if isinstance(commit.disposition, Ended):
                found[commit.run_id] = terminus(thread_id, commit.run_id, commit.disposition.cause, finals.get(commit.run_id))
    return found


def _child_result(where: str, message: Message, expected: JsonValue) -> list[str]:
    """A concurrent delegation's output is its child's committed terminus (I15)."""
    content = message.content
    if not isinstance(content, dict) or content.get("kind") != ResultKind.OUTPUT.value:
        return []
    if expected is not None and content.get("value") == expected:
        return []
    return [f"I15 {where}: the result of call {message.call_id} is not its child's committed terminus"]


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
