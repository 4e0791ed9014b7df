"""Examples for the hooks that stage: staged Run state (``staged``: absent is
unchanged, null clears it) and AfterTool reactions, committed with the terminal result
and immutable like it."""

from __future__ import annotations

from collections.abc import Callable

from example_log import Line, Log, allow, call, mutated
from runkernel.kernel.protocol import InferenceResult, ToolFinished, ToolOutput
from runkernel.kernel.state import Staged
from runkernel.kernel.values import EndCauseKind


def _staged_run() -> Log:
    log = Log()
    log.activate("thread-1", "run-1", "Plan a trip, then book it.")
    log.feed("run-1", InferenceResult(
        "", calls=(call("call-1", "search", {"q": "trains"}), call("call-2", "book", {"seat": "12A"})),
        batch_id="batch-1", staged=Staged({"plan": ["search", "book"]})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", ToolFinished("call-1", 1, ToolOutput(["IC 123"]), reaction={"note": "one train"}))
    return log


def legal_staged_and_reactions() -> list[Line]:
    log = _staged_run()
    log.feed("run-1", allow("call-2"))
    log.feed("run-1", ToolFinished("call-2", 1, ToolOutput("booked"), reaction="confirm with the user"))
    log.feed("run-1", InferenceResult("Booked IC 123.", end=EndCauseKind.COMPLETED, staged=Staged(None)))
    return log.lines


def var_reaction_rewritten() -> tuple[list[Line], str, str]:
    log = _staged_run()
    log.add(mutated(log.peek("run-1", allow("call-2")),
                    lambda ln: ln["batch"]["calls"][0].__setitem__("reaction", {"note": "no train"})))
    return (log.lines, "terminal-result-immutable",
            "call-1's committed reaction {\"note\": \"one train\"} is rewritten in a later commit.")


def var_reaction_before_result() -> tuple[list[Line], str, str]:
    log = _staged_run()
    log.add(mutated(log.peek("run-1", allow("call-2")),
                    lambda ln: ln["batch"]["calls"][1].__setitem__("reaction", "early")))
    return (log.lines, "edge-condition",
            "call-2 carries a reaction while Executing: a reaction is committed with the terminal result.")


HOOKS_LEGAL: dict[str, Callable[[], list[Line]]] = {
    "staged-state-and-reactions": legal_staged_and_reactions,
}

HOOKS_VARIANTS: dict[str, Callable[[], tuple[list[Line], str, str]]] = {
    "terminal-result-immutable--reaction-rewritten": var_reaction_rewritten,
    "edge-condition--reaction-before-result": var_reaction_before_result,
}

__all__ = ["HOOKS_LEGAL", "HOOKS_VARIANTS"]
