"""Seed programs of the stateful test's machine (``runtime_harness.py``): for each
staged-hook and concurrent-delegation scenario, a fixed sequence of rules that reaches
it. ``tests/drive/test_stateful_runtime.py`` plays them before the drawn examples, so every
scenario is reached in every run, whatever the draws (most programs are the ones
Hypothesis shrank a search for the scenario to).

A program is a list of (rule, arguments), played on a fresh machine as Hypothesis plays
its examples: ``configure`` first, the invariants after every rule, ``teardown`` last.
"""

from __future__ import annotations

from collections.abc import Mapping

from runkernel.kernel.policies import IndeterminateChoice
from runkernel.kernel.state import EndCause
from runkernel.kernel.values import EndCauseKind
from runkernel.testing import OK, Boundary, StepScript
from runtime_harness import RuntimeMachine
from runtime_harness_hooks import STAGING_REDERIVED
from runtime_harness_ledger import AFTER_GROUP, PARENT_ENDED, PUBLISHED, REACTED, STAGED, TOGETHER
from runtime_harness_scripts import TEXT_CONTINUE, delegation_step, tool_step
from runtime_harness_state import (
    CHILD_CANCELLED,
    CHILD_CRASHED,
    CHILD_ENDED_PARENT_DOWN,
    CRASH_WITH_CHILDREN,
    SCENARIOS,
)
from runtime_harness_world import REACH

Rule = tuple[str, Mapping[str, object]]
Program = tuple[Rule, ...]

CANCEL = EndCause(EndCauseKind.CANCELLED)
ONE_REPLAY = tool_step([("replay", [OK], "permit")])
#: two delegations whose children end at once, then an ordinary replay call
GROUP = delegation_step(("end", "permit"), ("end", "permit"), ("replay", [OK], "permit"))


def configure(*script: StepScript) -> Rule:
    """Hooks on, the default policies, one Run with ``script``."""
    return ("configure", {"max_steps": None, "choice": IndeterminateChoice.PUBLISH, "hooks": True, "script": script})


ADVANCE: Rule = ("advance", {})
TO_STOP: Rule = ("advance_further", {"effects": REACH})

SEEDS: Mapping[str, Program] = {
    STAGED: (configure(TEXT_CONTINUE), TO_STOP),
    STAGING_REDERIVED: (configure(ONE_REPLAY), ADVANCE, ("advance_further", {"effects": 3}), ("recover", {"pick": 0})),
    REACTED: (configure(ONE_REPLAY), ("recover", {"pick": 0})),
    TOGETHER: (configure(GROUP), ("recover", {"pick": 0})),
    AFTER_GROUP: (
        configure(ONE_REPLAY, delegation_step(("end", "permit"), ("end", "refuse"), ("replay", [OK], "permit"))),
        TO_STOP,
        TO_STOP,
        TO_STOP,
    ),
    PUBLISHED: (
        configure(GROUP),
        TO_STOP,
        TO_STOP,
        ("end", {"cause": CANCEL, "pick": 0, "via_inbox": False}),
        ("crash_at_boundary", {"boundary": Boundary.AFTER_WRITE, "pick": 1, "skip": 2}),
    ),
    CRASH_WITH_CHILDREN: (
        configure(delegation_step(("tool", "permit"), ("tool", "permit"), ("replay", [OK], "permit"))),
        TO_STOP,
        ("crash_at_boundary", {"boundary": Boundary.AFTER_WRITE, "pick": 0, "skip": 0}),
    ),
    CHILD_CRASHED: (
        configure(delegation_step(("tool", "permit"), ("tool", "permit"), ("replay", [OK], "permit"))),
        TO_STOP,
        ("drive_child", {"pick": 0}),
        ("crash_at_boundary", {"boundary": Boundary.AFTER_EFFECT, "pick": 0, "skip": 0}),
    ),
    CHILD_ENDED_PARENT_DOWN: (
        configure(ONE_REPLAY),
        ("start_another_run", {"pick": 0, "same_thread": False, "script": (ONE_REPLAY, GROUP)}),
        TO_STOP,
        TO_STOP,
    ),
    PARENT_ENDED: (
        configure(GROUP, ONE_REPLAY),
        ("crash_at_boundary", {"boundary": Boundary.AFTER_WRITE, "pick": 0, "skip": 2}),
        ("end_parent", {"cause": CANCEL, "drive": True, "pick": 0}),
    ),
    CHILD_CANCELLED: (
        configure(GROUP),
        ("recover", {"pick": 0}),
        TO_STOP,
        ("advance_further", {"effects": 3}),
        ADVANCE,
        ("end", {"cause": CANCEL, "pick": 0, "via_inbox": False}),
        # the parent's drive stopped quiet before the end (the runtime, a host of the
        # push core, stops once only children run): a polling worker picks it up
        TO_STOP,
    ),
}
assert set(SEEDS) == set(SCENARIOS), "every scenario has its seed program"


def play_seed(machine: RuntimeMachine, program: Program) -> set[str]:
    """Play ``program`` on ``machine`` as Hypothesis plays an example: the invariants
    after every rule, teardown last. The scenarios it reached."""
    try:
        for name, arguments in program:
            getattr(machine, name)(**arguments)
            machine.committed_facts_hold()
    finally:
        machine.teardown()
    return set(machine.seen)
