"""``runkernel upgrade-check``: can a new app continue every live Run of its name?

For each Run of the app that is not Ended, the verdict is read from committed state
alone (the Run's snapshot: its open batch with the policies committed with it, its
wait, its staged state; and whose child or parent it is), never by running anything:

- every call of the open batch that is not terminal (Requested, Executing, Awaiting:
  the awaited call is one of them) names a tool of the new app's tool table. A removed
  or renamed tool with an open call blocks, naming the call and the tool; a terminal
  call's tool is not needed (its result is published as committed). An app whose tools
  are listed while it runs (``dynamic_tools``: MCP servers) may still have a tool its
  table lacks: that is a note, not a block;
- the policies committed with the batch stay in force whatever the new code declares
  (I11): where the new app declares another policy for a tool with an open call, the
  row says so, and it never blocks;
- a wait the gate placed (approval, input, external) needs a gate in the new app: the
  calls after it in the batch would otherwise run unasked; staged hook state needs
  hooks in the new app, or nobody reads it again;
- a Run sleeping on a timer is checked like any awaited call (its tool runs when the
  timer fires); a Run in a delegation group (a parent with children running, or such a
  child) can continue only if every live Run of its group can: a child's end is its
  parent's input, and a blocked parent never takes it.

The model and its prompt are not checked: a prompt change never blocks.

``judge_run`` and ``judge_groups`` are the pure decision (unit-tested on snapshots);
``upgrade_check`` reads a store and applies them; ``accept_upgrade`` records the new
app's version as able to drive the versions it checked (``Store.accept_versions``, one
write, all of it or nothing), only when every Run can continue: an operator's decision,
kept in the store, never in a Run's log.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import assert_never

from attrs import evolve, frozen

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.work import state_name
from runkernel.adapters.worker.apps import AsyncPushApp, PushApp, RuntimeApp, WorkerApp, version_of
from runkernel.errors import UpgradeBlocked
from runkernel.kernel.codec import policy_to_json
from runkernel.kernel.delegation import executing_delegations
from runkernel.kernel.policies import ToolPolicy, tool_policies
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    Ended,
    ParentCall,
    RunSnapshot,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.values import JsonValue, WaitKind


class Presence(enum.Enum):
    """Whether the new app has a port (its gate, its hooks)."""

    YES = "yes"
    NO = "no"
    #: the app sets it inside its own drive (an asyncio push app sets ``driver.gate``
    #: there; a push host reads staged state in its own code): not known beforehand
    IN_ITS_DRIVE = "in its drive"


@frozen
class NewApp:
    """What the check knows of the new app: its name, its tool table (every tool with
    the policy it declares), whether it has a gate and hooks, and whether more tools
    are listed while it runs (``dynamic_tools``)."""

    name: str
    tools: Mapping[str, ToolPolicy]
    gate: Presence
    hooks: Presence
    dynamic_tools: bool = False


def new_app_of(app: WorkerApp) -> NewApp:
    """The facts of a worker app (as ``runkernel worker --app`` loads it) the check reads."""
    if isinstance(app, RuntimeApp):
        return NewApp(
            app.name,
            dict(app.tools.policies.tools),
            Presence.NO if app.gate is None else Presence.YES,
            Presence.NO if app.hooks is None else Presence.YES,
        )
    tools = dict(tool_policies(app.tools))
    if getattr(app, "gate", None) is not None:
        gate = Presence.YES
    elif isinstance(app, AsyncPushApp) and not isinstance(app, PushApp):
        gate = Presence.IN_ITS_DRIVE  # driver.gate may be set in drive (see AsyncPushApp)
    else:
        gate = Presence.NO  # the worker builds its driver with AllowAll
    return NewApp(app.name, tools, gate, Presence.IN_ITS_DRIVE, getattr(app, "dynamic_tools", False) is True)


@frozen
class PolicyDifference:
    """A tool with an open call whose policy in the new app is not the one committed
    with the call's batch; the committed one governs the call (None: the call was
    committed without a policy, so the new app's declaration governs it)."""

    call_id: str
    tool: str
    committed: ToolPolicy | None
    declared: ToolPolicy

    def to_json(self) -> dict[str, JsonValue]:
        """The difference as ``--format json`` prints it (each policy as a trace holds it)."""
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "committed": None if self.committed is None else policy_to_json(self.committed),
            "declared": policy_to_json(self.declared),
            "governs": "declared" if self.committed is None else "committed",
        }

    def __str__(self) -> str:
        if self.committed is None:
            return (
                f"call {self.call_id} ({self.tool}) was committed without a policy: the new code's "
                f"{policy_text(self.declared)} governs it"
            )
        return (
            f"call {self.call_id} ({self.tool}) keeps its committed {policy_text(self.committed)}; "
            f"the new code declares {policy_text(self.declared)}"
        )


def policy_text(policy: ToolPolicy) -> str:
    """A policy in one short phrase: ``replay(max_attempts=3)``, ``indeterminate, 2
    retries, concurrent``."""
    mode = policy.recovery.mode.value
    text = f"replay(max_attempts={policy.recovery.max_attempts})" if mode == "replay" else mode
    retries = policy.retry.max_attempts - 1
    extras = [f"{retries} retr{'y' if retries == 1 else 'ies'}"] if retries else []
    if policy.terminal_only_delegation:
        extras.append("terminal-only delegation")
    if policy.sequential_delegation:
        extras.append("sequential delegation")
    if policy.concurrent:
        extras.append("concurrent")
    return ", ".join([text, *extras])


@frozen
class RunFacts:
    """What the check reads of one live Run: its latest committed snapshot, the app
    version its activation recorded (None: none), and the parent call it was activated
    for when it is a delegation's child."""

    snapshot: RunSnapshot
    app_version: str | None = None
    parent: ParentCall | None = None


@frozen
class RunVerdict:
    """One row of the report: whether the new app can continue the Run, and why not
    (``reasons``, each naming what blocks); ``notes`` say what was seen that does not
    block (a timer, a delegation group, a port the app sets in its drive)."""

    run_id: str
    thread_id: str
    state: str
    app_version: str | None
    can_continue: bool
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    policy_differences: tuple[PolicyDifference, ...] = ()
    #: the Runs of its delegation group it depends on: its parent, its running children
    group: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``continue`` or ``blocked``."""
        return "continue" if self.can_continue else "blocked"

    def to_json(self) -> dict[str, JsonValue]:
        """The row as ``--format json`` prints it."""
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "state": self.state,
            "app_version": self.app_version,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "policy_differences": [d.to_json() for d in self.policy_differences],
            "group": list(self.group),
        }


_GATE_WAITS = (WaitKind.APPROVAL, WaitKind.INPUT, WaitKind.EXTERNAL)


def judge_run(facts: RunFacts, new: NewApp) -> RunVerdict:
    """The verdict on one live Run from its committed facts alone (pure): see the
    module docstring for the rules. Its group's verdicts are joined by ``judge_groups``."""
    snapshot = facts.snapshot
    reasons: list[str] = []
    notes: list[str] = []
    differences: list[PolicyDifference] = []
    batch = snapshot.open_batch
    open_calls = [c for c in batch.calls if not is_terminal(c.status)] if batch is not None else []
    for call in open_calls:
        declared = new.tools.get(call.tool)
        if declared is None and new.dynamic_tools:
            notes.append(
                f"call {call.call_id} ({_status_word(call)}) needs tool {call.tool!r}, which is not in the new "
                "app's tool table; its MCP servers may list it while it runs (not checked)"
            )
        elif declared is None:
            reasons.append(
                f"call {call.call_id} ({_status_word(call)}) needs tool {call.tool!r}, which the new app does not have"
            )
        elif call.policy != declared:
            differences.append(PolicyDifference(call.call_id, call.tool, call.policy, declared))
    awaited = _awaited_call(snapshot)
    if awaited is not None:
        _judge_wait(awaited, new, reasons, notes)
    if snapshot.staged is not None:
        if new.hooks is Presence.NO:
            reasons.append("it has staged hook state, and the new app has no hooks to read it")
        elif new.hooks is Presence.IN_ITS_DRIVE:
            notes.append("it has staged hook state: the new app's own code reads it (not checked)")
    group: list[str] = []
    if facts.parent is not None:
        group.append(facts.parent.run_id)
        notes.append(f"a child of run {facts.parent.run_id} (call {facts.parent.call_id})")
    children = [c.delegation.run_id for c in executing_delegations(batch) if c.delegation] if batch else []
    if awaited is not None and isinstance(awaited.status, CallAwaiting) and awaited.status.wait.child is not None:
        children.append(awaited.status.wait.child)  # a sequential delegation's child talks back
    if children:
        group.extend(children)
        notes.append(f"a parent waiting for {len(children)} child run(s): {', '.join(children)}")
    return RunVerdict(
        snapshot.run_id,
        snapshot.thread_id,
        state_name(snapshot),
        facts.app_version,
        not reasons,
        tuple(reasons),
        tuple(notes),
        tuple(differences),
        tuple(group),
    )


def _status_word(call: ToolCall) -> str:
    return type(call.status).__name__.removeprefix("Call")


def _awaited_call(snapshot: RunSnapshot) -> ToolCall | None:
    batch = snapshot.open_batch
    if not isinstance(snapshot.state, Awaiting) or batch is None:
        return None
    return batch.call(snapshot.state.ticket.call_id)


def _judge_wait(call: ToolCall, new: NewApp, reasons: list[str], notes: list[str]) -> None:
    assert isinstance(call.status, CallAwaiting)
    wait = call.status.wait
    match wait.kind:
        case WaitKind.APPROVAL | WaitKind.INPUT | WaitKind.EXTERNAL:
            if new.gate is Presence.NO:
                reasons.append(
                    f"it awaits {wait.kind.value} for call {call.call_id} ({call.tool}), a wait its gate "
                    "placed, and the new app has no gate: the calls after it would run unasked"
                )
            elif new.gate is Presence.IN_ITS_DRIVE:
                notes.append(
                    f"it awaits {wait.kind.value} for call {call.call_id} ({call.tool}); the new app sets "
                    "its gate in its own drive (not checked)"
                )
        case WaitKind.SCHEDULED:
            notes.append(f"it sleeps until {wait.due_at} (call {call.call_id}, {call.tool} then runs)")
        case WaitKind.DELEGATION:
            notes.append(f"it awaits child run {wait.child} (call {call.call_id}, {call.tool})")
        case _:
            assert_never(wait.kind)


def judge_groups(verdicts: Sequence[RunVerdict]) -> list[RunVerdict]:
    """``verdicts`` with each delegation group joined (pure): a Run whose parent or
    child (among the Runs checked) is blocked is blocked too, saying by which."""
    by_id = {v.run_id: v for v in verdicts}
    blocked = {v.run_id for v in verdicts if not v.can_continue}
    # a group is connected by parent and child links: spread blocking to a fixed point
    changed = True
    while changed:
        changed = False
        for verdict in verdicts:
            if verdict.run_id in blocked:
                continue
            if any(member in blocked for member in _linked(verdict, by_id)):
                blocked.add(verdict.run_id)
                changed = True
    joined = []
    for verdict in verdicts:
        if verdict.can_continue and verdict.run_id in blocked:
            by = sorted(m for m in _linked(verdict, by_id) if m in blocked)
            reason = f"it is in a delegation group with blocked run(s) {', '.join(by)}"
            verdict = evolve(verdict, can_continue=False, reasons=(*verdict.reasons, reason))
        joined.append(verdict)
    return joined


def _linked(verdict: RunVerdict, by_id: Mapping[str, RunVerdict]) -> set[str]:
    """The Runs linked to ``verdict``'s: those it names, and those that name it."""
    linked = set(verdict.group)
    linked.update(v.run_id for v in by_id.values() if verdict.run_id in v.group)
    return linked


@frozen
class UpgradeReport:
    """The verdict on every live Run of the app (newest activation first), and the new
    app's version."""

    app: str
    version: str
    verdicts: tuple[RunVerdict, ...]

    @property
    def can_continue_all(self) -> bool:
        """Whether the new app can continue every live Run (``upgrade-check`` exits 0)."""
        return all(v.can_continue for v in self.verdicts)

    @property
    def checked_versions(self) -> frozenset[str]:
        """The other app versions the checked Runs recorded: what ``accept_upgrade``
        records the new version able to drive (Runs of the new version itself, and Runs
        without a version, which any worker of their app drives, add none)."""
        return frozenset(v.app_version for v in self.verdicts if v.app_version not in (None, self.version))


#: Runs listed per page of ``Store.list_runs``.
_PAGE = 200


def live_runs(store: Store, app: str) -> Iterator[RunFacts]:
    """Every Run of ``app`` that is not Ended, newest activation first, with its
    committed facts: one page of summaries at a time, then one snapshot read per Run
    (never its history)."""
    after: str | None = None
    while True:
        page = store.list_runs(app=app, limit=_PAGE, after=after)
        for summary in page:
            if summary.state == "ended":
                continue
            snapshot = store.run(summary.run_id)
            if snapshot is None or isinstance(snapshot.state, Ended):
                continue  # it ended since it was listed
            yield RunFacts(snapshot, summary.app_version, store.parent_of(summary.run_id))
        if len(page) < _PAGE:
            return
        after = page[-1].run_id


def upgrade_check(
    store: Store, app: WorkerApp, *, progress: Callable[[int, int], None] | None = None
) -> UpgradeReport:
    """Whether ``app`` can continue every Run of its name that is not Ended in
    ``store``, one verdict per Run, from committed state alone. ``progress(done,
    total)`` is told after each Run (``total`` counts at most ``count_runs``' cap)."""
    new = new_app_of(app)
    total = store.count_runs(app=new.name, state="running") + store.count_runs(app=new.name, state="awaiting")
    verdicts = []
    for facts in live_runs(store, new.name):
        verdicts.append(judge_run(facts, new))
        if progress is not None:
            progress(len(verdicts), max(total, len(verdicts)))
    return UpgradeReport(new.name, version_of(app), tuple(judge_groups(verdicts)))


def accept_upgrade(store: Store, report: UpgradeReport) -> frozenset[str]:
    """Record in ``store`` that workers of the report's app at its new version may drive
    the Runs of every version the report checked (``checked_versions``), and return
    those versions (none: nothing was written). Refused with ``UpgradeBlocked``, nothing
    written, unless every Run the report checked can continue. Runs activated after the
    check are not covered: check again before accepting what they recorded."""
    blocked = [v.run_id for v in report.verdicts if not v.can_continue]
    if blocked:
        raise UpgradeBlocked(
            f"{len(blocked)} live run(s) of app {report.app!r} cannot be continued by version "
            f"{report.version!r} ({', '.join(blocked[:5])}{', ...' if len(blocked) > 5 else ''}); nothing recorded"
        )
    drives = report.checked_versions
    if drives:
        store.accept_versions(report.app, report.version, sorted(drives))
    return drives
