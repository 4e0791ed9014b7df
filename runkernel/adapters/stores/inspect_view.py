"""``runkernel inspect``: the "state you need to confirm" table for one Run,
answered from committed facts only (never from a worker, a stream or a UI)."""

from __future__ import annotations

import json
from typing import Any

from runkernel.adapters.stores.fleet import Fleet
from runkernel.adapters.stores.inspect_calls import batch_histories
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.run_views import lease_json, lease_text
from runkernel.adapters.stores.work import state_name
from runkernel.kernel.codec import call_to_json, disposition_to_json, message_to_json
from runkernel.kernel.edges import call_phase
from runkernel.kernel.protocol import PAYLOAD_NAMES, PAYLOADS_BY_WAIT
from runkernel.kernel.recover import classify
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallIndeterminate,
    Ended,
    RunSnapshot,
    ThreadCommit,
    ToolCall,
)


def _run_log(store: Store, snapshot: RunSnapshot) -> list[ThreadCommit]:
    """The Run's own commits, read once for everything ``inspect`` shows."""
    return [c for c in store.commits(snapshot.thread_id) if c.run_id == snapshot.run_id]


def _latest_calls(log: list[ThreadCommit]) -> list[ToolCall]:
    """Every call of the Run with its latest committed status (batches may be dropped
    once finalized, so the log is read, not only the snapshot)."""
    latest: dict[str, ToolCall] = {}
    for commit in log:
        for call in commit.batch.calls if commit.batch is not None else ():
            latest[call.call_id] = call
    return list(latest.values())


def find_indeterminate(store: Store, operation_id: str) -> tuple[str, str] | None:
    """(run id, call id) of the Indeterminate call with this operation id, if any."""
    for thread_id in store.thread_ids():
        for commit in store.commits(thread_id):
            for call in commit.batch.calls if commit.batch else ():
                if call.operation_id == operation_id and isinstance(call.status, CallIndeterminate):
                    return commit.run_id, call.call_id
    return None


def inspect_json(store: Store, snapshot: RunSnapshot) -> dict[str, Any]:
    """Everything ``inspect`` shows, as JSON."""
    state = snapshot.state
    ticket = None
    if isinstance(state, Awaiting):
        accepts = [PAYLOAD_NAMES[t] for t in PAYLOADS_BY_WAIT[state.ticket.wait]]
        waiting = snapshot.batch.call(state.ticket.call_id) if snapshot.batch else None
        wait = waiting.status.wait if waiting is not None and isinstance(waiting.status, CallAwaiting) else None
        ticket = {
            "ticket_id": state.ticket.ticket_id,
            "wait": state.ticket.wait.value,
            "call_id": state.ticket.call_id,
            "accepts": accepts,
            # what an operator approves: the call and its arguments, and when the wait ends
            "tool": None if waiting is None else waiting.tool,
            "arguments": None if waiting is None else waiting.arguments,
            "expires_at": None if wait is None else wait.expires_at,
            "due_at": None if wait is None else wait.due_at,
            # what the hold asked (an approval prompt, an input's question), as committed
            "request": None if wait is None else wait.request,
        }
    calls = snapshot.batch.calls if snapshot.batch else ()
    log = _run_log(store, snapshot)
    indeterminate = [
        {
            "call_id": c.call_id,
            "operation_id": c.operation_id,
            "reconciliations": [
                {"outcome": r.outcome, "note": r.note} for r in store.reconciliations(c.operation_id)
            ],
        }
        for c in _latest_calls(log)
        if isinstance(c.status, CallIndeterminate)
    ]
    return {
        "run_id": snapshot.run_id,
        "thread_id": snapshot.thread_id,
        "version": snapshot.version,
        "step": snapshot.step,
        "run_state": disposition_to_json(state),
        "recovery_row": classify(snapshot).value,
        "batch": None
        if snapshot.batch is None
        else {
            "batch_id": snapshot.batch.batch_id,
            "step": snapshot.batch.step,
            "finalized": snapshot.batch.finalized,
            "calls": [call_to_json(c) for c in calls],
        },
        "ticket": ticket,
        "batches": batch_histories(log),
        "messages": [message_to_json(m) for c in log for m in c.messages],
        "indeterminate": indeterminate,
        "pending_commands": [
            {"entry_id": e.entry_id, "command": e.body} for e in store.pending_commands(snapshot.run_id)
        ],
        "settled_commands": [
            {"entry_id": e.entry_id, "command": e.body, "outcome": e.outcome}
            for e in store.commands(snapshot.run_id)
            if e.state == "settled"
        ],
        "app": log[0].app if log else None,
        "forked_from": _forked_from(log[0] if log else None),
        # the version of the app's code its activation recorded (None: before versions)
        "app_version": log[0].app_version if log else None,
        # why no live worker may drive it (None: one may, or it ended): Versions
        "not_driven": Fleet(store).undriven(log[0].app if log else None, log[0].app_version if log else None,
                                            state_name(snapshot)),
        "writer": _writer(store, snapshot),
        "lease": lease_json(store.lease_status(snapshot.run_id)),
    }


def _forked_from(first: ThreadCommit | None) -> dict[str, Any] | None:
    """Where a fork came from (its first commit's ``forked_from``), or None."""
    forked = first.forked_from if first is not None else None
    return None if forked is None else {"thread_id": forked.thread_id, "run_id": forked.run_id, "version": forked.version}


def _writer(store: Store, snapshot: RunSnapshot) -> dict[str, Any] | None:
    """Who wrote the latest commit (a worker and its lease epoch), if a lease did."""
    writer = store.writer_of(snapshot.thread_id, snapshot.version)
    return None if writer is None else {"worker_id": writer.worker_id, "epoch": writer.epoch}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def inspect_text(store: Store, snapshot: RunSnapshot) -> str:
    """The four questions about a Run, one section each, then reconciliation hints."""
    view = inspect_json(store, snapshot)
    lease = store.lease_status(snapshot.run_id)
    state = snapshot.state
    out = [f"run {snapshot.run_id}  thread {snapshot.thread_id}  version {snapshot.version}  step {snapshot.step}", ""]
    forked = view["forked_from"]
    if forked is not None:
        out[1:1] = [f"forked from run {forked['run_id']} at version {forked['version']} of thread {forked['thread_id']}"]
    if isinstance(state, Ended):
        status = f"Ended({state.cause.kind.value})"
        if state.cause.error is not None:
            status += f" {state.cause.error.type}: {state.cause.error.message}"
    else:
        status = type(state).__name__
    out += [
        "Is execution still running, waiting, or finished?  (latest committed RunState)",
        f"  {status}; recovery would apply row '{view['recovery_row']}'",
        f"  {lease_text(lease, state_name(snapshot))}",
        f"  app {view['app'] or '-'}, version {view['app_version'] or '- (any worker of its app)'}"
        + (f"; not driven: {view['not_driven']}" if view["not_driven"] else ""),
        "",
        "Has the model requested a Tool?  (Run-scoped ActiveToolBatch)",
    ]
    if snapshot.batch is None:
        out.append("  no open batch" if view["batches"] else "  no batch")
    else:
        batch = snapshot.batch
        out.append(f"  batch {batch.batch_id} (step {batch.step}, {'finalized' if batch.finalized else 'open'})")
        for call in batch.calls:
            detail = ""
            if isinstance(call.status, CallAwaiting):
                detail = f"wait={call.status.wait.kind.value}"
            elif isinstance(call.status, CallCompleted):
                detail = f"result={call.status.result.kind.value}"
            elif isinstance(call.status, CallIndeterminate):
                detail = f"reason={call.status.reason.value}"
            out.append(
                f"  - {call.call_id}  {call.tool}  {call_phase(call.status).value}  "
                f"attempt={call.status.attempt}  operation={call.operation_id}  {detail}".rstrip()
            )
    if view["batches"]:
        out += ["", "Every call of every batch, with its history:"]
        for batch_view in view["batches"]:
            out.append(f"  batch {batch_view['batch_id']} (step {batch_view['step']})")
            for call_view in batch_view["calls"]:
                out.append(f"  - {call_view['call_id']}  {call_view['tool']}  arguments={_json(call_view['arguments'])}")
                # one list in commit order: a resume is read where it was committed, before
                # the status that commit gave the call
                lines: list[tuple[int, int, str]] = []
                for change in call_view["history"]:
                    fields = {k: v for k, v in change.items() if k not in ("version", "status")}
                    extra = "  ".join(f"{k}={_json(v)}" for k, v in fields.items())
                    lines.append((change["version"], 1, f"{change['status']}  {extra}".rstrip()))
                for resume in call_view["resumes"]:
                    lines.append((resume["version"], 0, f"resumed with {_json(resume['payload'])}"))
                out += [f"      v{version}: {text}" for version, _, text in sorted(lines)]
    out += ["", "What input can resume an Awaiting Run?  (committed ResumeTicket)"]
    ticket = view["ticket"]
    if ticket is None:
        out.append("  none: the Run is not Awaiting")
    else:
        out.append(
            f"  ticket {ticket['ticket_id']}  wait={ticket['wait']}  call={ticket['call_id']}  "
            f"accepts: {' | '.join(ticket['accepts'])}"
        )
        out.append(f"  the call: {ticket['tool']} arguments={_json(ticket['arguments'])}")
        if ticket["request"] is not None:
            shown = ticket["request"] if isinstance(ticket["request"], str) else _json(ticket["request"])
            out.append(f"  request: {shown}")
        if ticket["expires_at"]:
            out.append(f"  deadline: {ticket['expires_at']}")
        if ticket["due_at"]:
            out.append(f"  due at: {ticket['due_at']}")  # a timer fires then; nothing expires
    out += ["", "Has displayed text become Thread truth?  (committed messages of this Run)"]
    for message in view["messages"]:
        raw = message.get("content")
        content = raw if isinstance(raw, str) else _json(raw)
        who = message["role"] + (f"[{message['call_id']}]" if "call_id" in message else "")
        out.append(f"  {who}: {content}")
    if view["indeterminate"]:
        out += ["", "Indeterminate calls (reconcile downstream by operation id):"]
        for entry in view["indeterminate"]:
            recorded = ", ".join(
                f"{number}. {r['outcome']}" + (f" ({r['note']})" if r["note"] else "")
                for number, r in enumerate(entry["reconciliations"], 1)
            ) or "not reconciled"
            out.append(f"  - {entry['call_id']}  operation={entry['operation_id']}  {recorded}")
    if view["pending_commands"]:
        out += ["", f"Pending commands in the inbox: {len(view['pending_commands'])}"]
        # numbered as `runkernel resume` printed them ("queued command N")
        out += [f"  - command {e['entry_id']}: {_json(e['command'])}" for e in view["pending_commands"]]
    if view["settled_commands"]:
        out += ["", "Settled commands (an Ended Run keeps only the applied ones):"]
        out += [f"  - command {e['entry_id']}: {e['outcome']}" for e in view["settled_commands"]]
    if view["writer"] is not None:
        out += ["", f"Last written by worker {view['writer']['worker_id']} (lease epoch {view['writer']['epoch']})"]
    return "\n".join(out) + "\n"
