"""What one crash test plays: a ``Scenario`` (the Run's user messages, the model's turns
when the app's own model is not used, how each wait is answered), and its JSON form.

A scenario file is one JSON object, or a list of them, each as the shipped JSON Schema
says (``scenario_schema()``, ``runkernel/testing/crashtest/scenario.schema.json``)::

    {"name": "pay-approved",
     "messages": ["book me a table"],
     "turns": [{"text": "paying", "calls": [{"tool": "pay", "arguments": {"amount": 20}}]},
               {"text": "done", "end": "completed"}],
     "answers": ["approve"]}

``turns`` replaces the app's model by a script (step k answers with turn k; past the
last turn the Run completes): a real LLM cannot be replayed. Without ``turns`` the app's
own model is used, and it must be deterministic; the child Runs of delegations always
ask the app's own model. ``answers`` answer the waits of the Run and of its child Runs
in the order they come (``"approve"``, ``{"deny": REASON}``, ``{"input": VALUE}``,
``{"external": VALUE}``, ``"cancel"``; past the list each wait is answered as its kind
asks: approve, input ``"42"``, an external ``{}``); every answer goes through the store's inbox, as a
queued ``runkernel resume`` or ``cancel`` does. A timer (a scheduled wait) takes no
answer: the clock moves to its due time and the next drive fires it, as a worker's does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from attrs import frozen

from runkernel.adapters.drive.actions import CallRequest
from runkernel.adapters.drive.ports import InferenceRequest, ModelPort, ModelReply
from runkernel.errors import BadScenario
from runkernel.kernel.protocol import (
    Approve,
    Deny,
    ExternalResult,
    ProvideInput,
    ResumePayload,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, WaitKind


#: How a wait is answered: ``approve``, ``deny``, ``input``, ``external`` or ``cancel``.
ANSWER_KINDS = ("approve", "deny", "input", "external", "cancel")


@frozen
class Answer:
    """How one wait is answered: ``kind`` is one of ``ANSWER_KINDS``; ``value`` is the
    denial's reason, the input, or the external result."""

    kind: str = "approve"
    value: JsonValue = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in ANSWER_KINDS:
            raise BadScenario(f"answer {self.kind!r}: expected one of {', '.join(ANSWER_KINDS)}")

    def payload(self) -> ResumePayload | None:
        """The resume payload (None for a cancel, which ends the Run instead)."""
        if self.kind == "approve":
            return Approve()
        if self.kind == "deny":
            return Deny(self.value)
        if self.kind == "input":
            return ProvideInput(self.value)
        if self.kind == "external":
            return ExternalResult(self.value)
        return None


def default_payload(wait: WaitKind) -> ResumePayload | None:
    """What a wait past a scenario's answers gets: what its kind asks for (a delegation
    wait, answered by its child, gets None: it is not the scenario's to answer; a timer
    is fired by the clock, not answered)."""
    payloads: dict[WaitKind, ResumePayload] = {
        WaitKind.APPROVAL: Approve(),
        WaitKind.INPUT: ProvideInput("42"),
        WaitKind.EXTERNAL: ExternalResult({}),
    }
    return payloads.get(wait)


@frozen
class Turn:
    """One scripted model turn: text, and either tool calls ``(tool, arguments)`` or an
    end (``end``, default: the Run goes on)."""

    text: str = ""
    calls: tuple[tuple[str, JsonValue], ...] = ()
    end: EndCauseKind | None = None


@frozen
class Scenario:
    """One Run to crash-test: its user ``messages``; ``turns``, the model's scripted
    turns (None: the app's own model); ``answers`` to its waits, in order."""

    name: str = "approve-every-wait"
    messages: tuple[str, ...] = ("crash test",)
    turns: tuple[Turn, ...] | None = None
    answers: tuple[Answer, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "-_." for c in self.name):
            raise BadScenario(f"scenario name {self.name!r}: letters, digits, '-', '_' and '.' only")
        if not self.messages or not all(isinstance(m, str) and m.strip() for m in self.messages):
            raise BadScenario(f"scenario {self.name}: give at least one non-empty user message")

    def answer(self, index: int) -> Answer | None:
        """The scenario's answer to its ``index``-th wait (None past the list)."""
        return self.answers[index] if index < len(self.answers) else None


class TurnsModel:
    """A model port that answers step k with turn k of a scenario (past them: the Run
    completes). Call ids are left to the driver: they come from the fixed ids. Given
    ``run_id``, only that Run's steps are scripted: any other Run (a delegation's
    child) is answered by ``others``, the app's own model."""

    def __init__(self, turns: Sequence[Turn], *, run_id: str | None = None, others: ModelPort | None = None) -> None:
        self.turns = tuple(turns)
        self.run_id, self.others = run_id, others

    def infer(self, request: InferenceRequest) -> ModelReply:
        """The turn of this step."""
        if self.others is not None and self.run_id is not None and request.run_id != self.run_id:
            return self.others.infer(request)
        if request.step > len(self.turns):
            return ModelReply("done", end=EndCauseKind.COMPLETED)
        turn = self.turns[request.step - 1]
        calls = tuple(CallRequest(tool, arguments) for tool, arguments in turn.calls)
        return ModelReply(turn.text, calls, turn.end)


def scenario_schema() -> str:
    """The JSON Schema (2020-12) of a scenario file, as shipped in the package."""
    return resources.files(__package__).joinpath("scenario.schema.json").read_text(encoding="utf-8")


def scenarios_from_json(text: str, source: str = "scenario") -> tuple[Scenario, ...]:
    """The scenarios of a scenario file's text (one object or a list of them);
    ``BadScenario`` names the first thing wrong, with ``source``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadScenario(f"{source}: not JSON: {error}") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise BadScenario(f"{source}: no scenario in the file")
    return tuple(_scenario(item, f"{source}[{n}]" if isinstance(data, list) else source) for n, item in enumerate(items))


_SCENARIO_KEYS = frozenset({"name", "messages", "turns", "answers"})
_TURN_KEYS = frozenset({"text", "calls", "end"})


def _scenario(item: Any, where: str) -> Scenario:
    obj = _object(item, where, _SCENARIO_KEYS, required=("name",))
    messages = obj.get("messages", ["crash test"])
    if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
        raise BadScenario(f"{where}: messages must be a list of strings")
    turns = obj.get("turns")
    if turns is not None and not isinstance(turns, list):
        raise BadScenario(f"{where}: turns must be a list")
    answers = obj.get("answers", [])
    if not isinstance(answers, list):
        raise BadScenario(f"{where}: answers must be a list")
    name = obj["name"]
    if not isinstance(name, str):
        raise BadScenario(f"{where}: name must be a string")
    return Scenario(
        name,
        tuple(messages),
        None if turns is None else tuple(_turn(t, f"{where}.turns[{n}]") for n, t in enumerate(turns)),
        tuple(_answer(a, f"{where}.answers[{n}]") for n, a in enumerate(answers)),
    )


def _turn(item: Any, where: str) -> Turn:
    obj = _object(item, where, _TURN_KEYS)
    text = obj.get("text", "")
    if not isinstance(text, str):
        raise BadScenario(f"{where}: text must be a string")
    calls = []
    for n, call in enumerate(obj.get("calls", [])):
        c = _object(call, f"{where}.calls[{n}]", frozenset({"tool", "arguments"}), required=("tool",))
        if not isinstance(c["tool"], str) or not c["tool"]:
            raise BadScenario(f"{where}.calls[{n}]: tool must be a tool's name")
        calls.append((c["tool"], c.get("arguments", {})))
    end = obj.get("end")
    try:
        kind = None if end is None else EndCauseKind(end)
    except ValueError:
        raise BadScenario(f"{where}: end {end!r} is not an end cause ({', '.join(k.value for k in EndCauseKind)})") from None
    return Turn(text, tuple(calls), kind)


def _answer(item: Any, where: str) -> Answer:
    if isinstance(item, str):
        if item not in ("approve", "cancel"):
            raise BadScenario(f"{where}: {item!r}: a bare answer is \"approve\" or \"cancel\"")
        return Answer(item)
    obj = _object(item, where, frozenset({"deny", "input", "external"}))
    if len(obj) != 1:
        raise BadScenario(f"{where}: give one of deny, input, external")
    ((kind, value),) = obj.items()
    return Answer(kind, value)


def _object(item: Any, where: str, keys: frozenset[str], required: Sequence[str] = ()) -> Mapping[str, Any]:
    if not isinstance(item, dict):
        raise BadScenario(f"{where}: expected a JSON object")
    unknown = sorted(set(item) - keys)
    if unknown:
        raise BadScenario(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))})")
    for key in required:
        if key not in item:
            raise BadScenario(f"{where}: {key!r} is required")
    return item


__all__ = [
    "ANSWER_KINDS",
    "Answer",
    "BadScenario",
    "Scenario",
    "Turn",
    "TurnsModel",
    "default_payload",
    "scenario_schema",
    "scenarios_from_json",
]
