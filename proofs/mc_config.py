"""Bounds, policies and fixed values of the bounded model checker (``model_check.py``).

A ``Profile`` is the whole bound: how many calls a tool step may carry, how many
steps and tool steps a Run may take, how many crashes a path may suffer, and which
choices the world and the operator may make. Values (tool output, payloads) are
constants: the kernel only compares them for equality, so varying them would only
multiply symmetric states.
"""

from __future__ import annotations

from dataclasses import dataclass

from runkernel.kernel.policies import (
    IndeterminateChoice,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.values import WaitKind

THREAD_ID = "thread-mc"
RUN_ID = "run-mc"

#: One tool per recovery policy. The replay tool also carries the retry policy.
TOOL_REPLAY = "replay"
TOOL_RECONNECT = "reconnect"
TOOL_INDETERMINATE = "indeterminate"
TOOLS: tuple[str, ...] = (TOOL_REPLAY, TOOL_RECONNECT, TOOL_INDETERMINATE)

ARGUMENTS = "args"
USER_TEXT = "hello"
TEXT_REPLY = "text"
TOOL_USE_TEXT = "tool-use"
OUTPUT = "out"
TOOL_ERROR = "err"
BLOCK_REASON = "blocked-by-gate"
SUPPLIED = "supplied-by-plugin"
STATUS_DONE = "status-done"
STATUS_FAILED = "status-failed"
CHILD_FINAL = "child-final"
#: A terminal-only delegation (the second CI bound).
TOOL_DELEGATE = "delegate"
#: One concurrent tool per recovery policy (the groups bound): a group of three.
GROUP_TOOLS: tuple[str, ...] = ("replay_c", "reconnect_c", "indeterminate_c")
DUE_AT = "2030-01-01T00:00:00Z"
EXPIRES_AT = "2030-06-01T00:00:00Z"
BEFORE_EXPIRY = "2030-05-31T23:59:59Z"
AFTER_EXPIRY = "2030-06-01T00:00:01Z"
FORGED_TICKET = "forged-ticket"
OTHER_RUN = "other-run"

#: Gate waits a gate may ask for (a delegation only ever comes from a tool).
GATE_WAITS: tuple[WaitKind, ...] = (
    WaitKind.APPROVAL,
    WaitKind.INPUT,
    WaitKind.EXTERNAL,
    WaitKind.SCHEDULED,
)


@dataclass(frozen=True)
class Profile:
    """One bound of the search."""

    name: str
    max_calls: int
    """Calls a tool step may carry (every count from 1 up to this, every tool mix)."""
    max_steps: int
    """``Policies.max_steps``: the Run ends with step_limit at this step."""
    tool_steps: int
    """How many inference results may be tool steps."""
    max_crashes: int
    tool_step_first_only: bool = True
    """True: only step 1 may be a tool step ("one tool step then one text step")."""
    gate_waits: tuple[WaitKind, ...] = GATE_WAITS
    approval_deadline: bool = True
    """The gate may also ask for an approval that expires; the runtime then applies the
    expiry as a deny (``DeadlinePassed``)."""
    tool_waits: bool = True
    waits_per_call: int = 1
    """How many waits (gate or tool) one call may enter: every resume starts a new
    attempt, so without this bound a tool that keeps scheduling itself never ends."""
    """Tools may delegate and schedule (waits that start after an attempt)."""
    operator_cancel_running: bool = True
    """The operator may cancel while the Run is Running (before a gate or inference)."""
    forged_commands: bool = True
    """Offer forged, wrong-kind, wrong-payload and stale resumes; each must be refused."""
    on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH
    max_states: int = 2_000_000
    check_liveness: bool = True
    """After the search, check that a final state stays reachable from every state."""
    delegations: bool = False
    """The concurrent-delegation bound: the tool step is two terminal-only delegations
    and one ordinary call (of each recovery policy in turn); children may end, crash
    once and be cancelled; the gate allows, blocks, supplies or (with ``gate_waits``)
    holds a call, a group member too (its gate round, ``CONCURRENCY_RULE``)."""
    max_child_crashes: int = 1
    groups: bool = False
    """The concurrent-call bound: the tool step is a group of three concurrent ordinary
    calls, one per recovery policy; the world answers their executors and status
    queries in any order, a crash may fall between any two starts and any two ends,
    and the operator may cancel while the group runs."""
    hash_compaction: bool = False
    """Remember visited states by a 64-bit hash of their key instead of the key (much
    less memory; two distinct states merge with probability about n^2 / 2^65)."""
    memo_kernel: bool = False
    """Answer repeated ``decide``/``validate_commit`` calls from a memo (``KernelMemo``:
    the kernel is pure, so the answer is the same; a speedup, not a reduction). It pays
    where many paths reach one snapshot (the deep bound: about a third less CPU time) and
    costs a little time and memory where few calls repeat (the CI bound)."""
    kernel_self_check: bool = False
    """Also run ``decide`` with its self-check on every answer. Off, the self-check runs
    only where the model's own judging of the answer does not imply it
    (``mc_runtime.self_check_implied``) and where the model finds a violation (to name
    it the kernel's error first, as the self-check would): the same graph and verdicts
    for about a quarter of the kernel's time less."""
    pickle_frontier: bool = False
    """Keep the BFS frontier pickled (less memory, about a third of the time spent
    pickling) instead of as live objects that share their snapshots."""

    def policies(self) -> Policies:
        return Policies(
            tools={
                # each may also delegate to a child that talks back (a sequential
                # delegation), so each is declared one: its child is fixed when it starts
                TOOL_REPLAY: ToolPolicy(
                    ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=2), RetryPolicy(2),
                    sequential_delegation=self.tool_waits,
                ),
                TOOL_RECONNECT: ToolPolicy(
                    ToolRecoveryPolicy(RecoveryMode.RECONNECT), sequential_delegation=self.tool_waits
                ),
                TOOL_INDETERMINATE: ToolPolicy(
                    ToolRecoveryPolicy(RecoveryMode.INDETERMINATE), sequential_delegation=self.tool_waits
                ),
                TOOL_DELEGATE: ToolPolicy(terminal_only_delegation=True),
                GROUP_TOOLS[0]: ToolPolicy.replay(2, retries=1, concurrent=True),
                GROUP_TOOLS[1]: ToolPolicy.reconnect(concurrent=True),
                GROUP_TOOLS[2]: ToolPolicy.indeterminate(concurrent=True),
            },
            max_steps=self.max_steps,
            on_indeterminate=self.on_indeterminate,
        )


PROFILES: dict[str, Profile] = {
    # the CI bound (docs/proofs.md): up to 2 calls, one tool step and one text step,
    # at most 1 crash. The tool step may come first or second (the second exercises the
    # step limit closing a batch); a call may wait once.
    "ci": Profile(
        name="ci", max_calls=2, max_steps=2, tool_steps=1, max_crashes=1, tool_step_first_only=False
    ),
    # the second CI bound (docs/proofs.md): two concurrent delegations
    # and one ordinary call in a batch, a child that may crash, one crash of the parent
    "delegations": Profile(
        name="delegations",
        max_calls=3,
        max_steps=2,
        tool_steps=1,
        max_crashes=1,
        gate_waits=(WaitKind.APPROVAL,),  # a member the gate holds: one approval wait per call
        approval_deadline=False,
        tool_waits=False,
        delegations=True,
        max_states=2_000_000,
    ),
    # the third CI bound (docs/proofs.md): a group of three concurrent ordinary calls,
    # one per recovery policy, one crash anywhere, an operator cancel during the group
    "groups": Profile(
        name="groups",
        max_calls=3,
        max_steps=2,
        tool_steps=1,
        max_crashes=1,
        gate_waits=(WaitKind.APPROVAL,),  # a member the gate holds leaves the group
        approval_deadline=False,
        tool_waits=False,  # a concurrent call never waits once started
        groups=True,
        max_states=2_000_000,
    ),
    # the proofs issue's bound: 3 calls, 2 steps, 2 crashes; a call may wait twice
    "deep": Profile(
        name="deep",
        max_calls=3,
        max_steps=2,
        tool_steps=1,
        max_crashes=2,
        tool_step_first_only=False,
        waits_per_call=2,
        max_states=100_000_000,
        hash_compaction=True,
        memo_kernel=True,
    ),
    # for the unit test: one call, one crash, approval as the only gate wait (about a second)
    "tiny": Profile(
        name="tiny",
        max_calls=1,
        max_steps=2,
        tool_steps=1,
        max_crashes=1,
        gate_waits=(WaitKind.APPROVAL,),
        approval_deadline=False,
    ),
}
