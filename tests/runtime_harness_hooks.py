"""The hooks and the model of the stateful test's machine (``runtime_harness.py``).

The hooks stage state and hand request-only context at BeforeInference and react at
AfterTool; every answer carries a serial number, so the invariants can tell which
answer a commit carries (the latest one the hook gave for that Step or attempt, since an
answer that was not committed before a crash is lost and the hook runs again). The
hooks and the model check what they are handed as they are handed it: the staged state
BeforeInference receives is the committed one, and the context an inference request
carries is the one this Step's hook has just answered (never one from before a crash).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable

from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Staging, ToolReply
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.state import Staged
from runkernel.kernel.values import JsonValue
from runkernel.testing import ScriptedModel, StepScript, World
from runtime_harness_scripts import CHILD_SCRIPTS

#: In every request-only context: no committed or exported line may ever contain it.
CONTEXT_MARK = "request-only-context"

#: Scenario names, counted per example (``RuntimeMachineState.note``).
STAGING_REDERIVED = "staging re-derived after a lost step"


class RecordingHooks:
    """BeforeInference answers, by serial: leave the staged state unchanged, stage a
    value, stage a value, clear it; always with request-only context. AfterTool reacts
    to every reply."""

    def __init__(self, store: Store, problems: list[str], note: Callable[[str], None]) -> None:
        self.store = store
        self.problems = problems
        self.note = note
        self.serial = itertools.count(1)
        #: the latest answer for each (run, step)
        self.staging: dict[tuple[str, int], Staging] = {}
        self.asked: collections.Counter[tuple[str, int]] = collections.Counter()
        #: Steps whose latest answer no inference request has used yet
        self.unused: set[tuple[str, int]] = set()
        #: the latest reaction for each (run, call, attempt)
        self.reactions: dict[tuple[str, str, int], JsonValue] = {}

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        committed = self.store.run(run_id)
        expected = committed.staged if committed is not None else None
        if staged != expected:
            self.problems.append(
                f"staged: BeforeInference of {run_id} step {step} was handed {staged!r}, "
                f"but the committed staged state is {expected!r}"
            )
        self.asked[(run_id, step)] += 1
        if self.asked[(run_id, step)] > 1:
            self.note(STAGING_REDERIVED)
        n = next(self.serial)
        value = {0: None, 1: Staged({"step": step, "hook": n}), 2: Staged([step, n]), 3: Staged(None)}[n % 4]
        answer = Staging(value, context={"mark": CONTEXT_MARK, "hook": n})
        self.staging[(run_id, step)] = answer
        self.unused.add((run_id, step))
        return answer

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        reaction: JsonValue = {"reacted_to": call_id, "attempt": attempt, "hook": next(self.serial)}
        self.reactions[(run_id, call_id, attempt)] = reaction
        return reaction


class HookedModel(ScriptedModel):
    """The scripted model, which also checks each request's context against the hook's
    latest answer for its Step (none without hooks), and answers a delegation's child
    with the script its activation message (the call's arguments) names."""

    def __init__(
        self,
        scripts: dict[str, tuple[StepScript, ...]],
        world: World,
        hooks: Callable[[], RecordingHooks | None],
        problems: list[str],
    ) -> None:
        super().__init__(scripts, world)
        self.machine_scripts = scripts
        self.hooks = hooks
        self.problems = problems

    def infer(self, request: InferenceRequest) -> ModelReply:
        key = (request.run_id, request.step)
        hooks = self.hooks()
        answer = hooks.staging.get(key) if hooks is not None else None
        fresh = hooks is None or key in hooks.unused
        expected = answer.context if answer is not None and fresh else None
        if request.context != expected:
            self.problems.append(
                f"context: inference of {request.run_id} step {request.step} carries {request.context!r}, "
                f"not the request-only context this Step's hook has just answered ({expected!r})"
            )
        if hooks is not None:
            hooks.unused.discard(key)
        if request.run_id not in self.machine_scripts and request.messages:
            named = request.messages[0].content
            child = named.get("child") if isinstance(named, dict) else None
            if isinstance(child, str) and child in CHILD_SCRIPTS:
                self.machine_scripts[request.run_id] = CHILD_SCRIPTS[child]
        return super().infer(request)
