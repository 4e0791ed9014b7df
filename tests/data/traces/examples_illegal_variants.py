"""Extra illegal example traces, each breaking a rule in another way than the rule's own
example (written as ``<rule>--<variant>.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable

from example_log import Line, Log, allow, call, done, mutated, text, tools
from examples_run_rules import ex_ticket_reused_across_runs, ex_ticket_reused_by_a_later_run_of_the_thread


# --- extra illegal variants (named <rule>--<variant>.jsonl) ----------------------------


def var_tool_use_without_batch() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", "run-1", "Check the weather, then the traffic.")
    log.feed("run-1", tools("batch-1", call("call-1", "weather", {"city": "Oslo"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, "snow"))

    def orphan_tool_use(ln: Line) -> None:
        ln["messages"] = [{"role": "assistant", "content": "",
                           "tool_calls": [{"call_id": "call-2", "tool": "traffic",
                                           "arguments": {"city": "Oslo"}}]}]

    log.add(mutated(log.peek("run-1", text("Snow in Oslo.")), orphan_tool_use))
    return (log.lines, "batch-complete-and-requested",
            "a tool-use message is committed while the finalized batch-1 is carried: it has no batch of its own.")


def var_result_type_changed() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", "run-1", "Count the users, then email the count.")
    log.feed("run-1", tools("batch-1", call("call-1", "users.count", {}),
                            call("call-2", "mail.send", {"to": "ops@example.com"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, 1))
    log.add(mutated(log.peek("run-1", allow("call-2")),
                    lambda ln: ln["batch"]["calls"][0]["result"].__setitem__("value", True)))
    return (log.lines, "terminal-result-immutable",
            "call-1's committed result 1 (a number) is rewritten as true (a boolean).")


def var_arguments_type_changed() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", "run-1", "Enable the feature flag.")
    log.feed("run-1", tools("batch-1", call("call-1", "flags.set", {"enabled": 1})))
    log.add(mutated(log.peek("run-1", allow("call-1")),
                    lambda ln: ln["batch"]["calls"][0]["arguments"].__setitem__("enabled", True)))
    return (log.lines, "batch-identity-stable",
            "call-1's arguments change from {\"enabled\": 1} to {\"enabled\": true} mid-batch.")


VARIANTS: dict[str, Callable[[], tuple[list[Line], str, str]]] = {
    "ticket-never-reused--across-runs": lambda: (
        ex_ticket_reused_across_runs(), "ticket-never-reused",
        "run-b's wait reuses the ticket id run-a already used in another thread."),
    "ticket-never-reused--by-a-later-run-of-the-thread": lambda: (
        ex_ticket_reused_by_a_later_run_of_the_thread(), "ticket-never-reused",
        "run-2 waits on the ticket id run-1 of the same thread used before it was cancelled."),
    "batch-complete-and-requested--tool-use-without-batch": var_tool_use_without_batch,
    "terminal-result-immutable--number-becomes-boolean": var_result_type_changed,
    "batch-identity-stable--arguments-number-becomes-boolean": var_arguments_type_changed,
}
