"""The race test's worker app: the example app's model and tools (a replay, a reconnect
and an indeterminate tool, each recording every executor start downstream with its
fencing token) without the approval gate, so every Run can end."""

from __future__ import annotations

from examples.demo_app import Lookup, Pay, Reserve, ScriptedModel
from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.worker.apps import RuntimeApp

app = RuntimeApp(
    name="race",
    model=ScriptedModel(),
    tools=ToolRegistry({"lookup": Lookup(), "reserve": Reserve(), "pay": Pay()}, max_steps=10),
)
