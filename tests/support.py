"""Small builders shared by the store and runtime tests: legal commit sequences made by
driving the kernel itself, so the tests never hand-write a commit the kernel would not.
They are the public ones of the store contract suite (``runkernel.conformance.runs``)."""

from __future__ import annotations

from runkernel.conformance.runs import activate, awaiting_run, step, text_run, tool_run

__all__ = ["activate", "awaiting_run", "step", "text_run", "tool_run"]
