"""A worker app whose committed data is hostile HTML: its model asks for a tool named
``<script>…`` with ``<script>`` in its arguments and says ``<script>`` in its text, and
the gate holds every call for approval (the console's escaping tests)."""

from __future__ import annotations

from runkernel import (
    CallRequest,
    EndCauseKind,
    Hold,
    InferenceRequest,
    ModelReply,
    Returned,
    RunCall,
    RuntimeApp,
    StatusReply,
    OperationStatus,
    ToolPolicy,
    ToolRegistry,
    WaitKind,
)
from runkernel.kernel import ToolCall

SCRIPT = "<script>alert(1)</script>"


class HostileModel:
    """Step 1 asks for the hostile tool; step 2 ends the Run."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply(f"text {SCRIPT}", (CallRequest(SCRIPT, {"html": SCRIPT}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class HostileTool:
    """Answers with hostile HTML too."""

    policy: ToolPolicy = ToolPolicy.replay()

    def run(self, call: RunCall) -> Returned:
        return Returned({"html": SCRIPT})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


class HoldEverything:
    """Every call waits for approval."""

    def check(self, run_id: str, call: ToolCall) -> Hold:
        return Hold(WaitKind.APPROVAL, {"prompt": SCRIPT})


app = RuntimeApp(
    name="hostile",
    model=HostileModel(),
    tools=ToolRegistry({SCRIPT: HostileTool()}, max_steps=5),
    gate=HoldEverything(),
)
