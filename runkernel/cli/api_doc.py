"""``docs/api.md``: the public API reference, generated from the docstrings.

``python -m runkernel.cli.api_doc > docs/api.md`` after changing a public name or its
docstring; a test fails while the page is stale. The page documents, in this order:
``runkernel`` (following ``runkernel.SECTIONS``, the table ``__all__`` is built from),
``runkernel.kernel`` (following its ``SECTIONS``) and the other documented modules
(``MODULES``), so a name cannot be public and undocumented.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import sys
import types
import typing
from typing import Any

import attrs

import runkernel
import runkernel.kernel

#: The documented modules besides ``runkernel`` and ``runkernel.kernel``: (module, what it
#: holds, the names documented).
MODULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "runkernel.errors",
        "Every error runkernel raises on purpose, in one tree (see the module's docstring).",
        (
            "RunkernelError", "UsageError", "DriverError", "UnknownTool", "HostProtocolError", "BadToolPolicy",
            "BadStoreUrl", "UnknownRun", "ForkRefused", "AppLoadError", "NoInvocation",
            "BadStoreUrl", "UnknownRun", "AppLoadError", "UpgradeBlocked", "NoInvocation",
            "PeerError", "RejectedError", "IllegalCommit", "RuntimeProtocolError", "TraceFormatError",
            "IllegalShape", "NotATrace", "NotIJson", "ConversationBusy", "StoreError", "CommitConflict", "StoreUnavailable",
            "SchemaError", "DamagedStore", "LeaseError", "LeaseHeld", "LeaseLost", "DriverStopped", "KernelBug",
        ),
    ),
    (
        "runkernel.adapters.stores.contract",
        "The store contract every store keeps (``open_store`` opens one by URL; "
        "docs/how-to/write-a-store.md has every method's contract).",
        ("Store", "InboxEntry", "Lease", "Writer", "LeaseStatus", "Settlement", "Checkpoint", "Reconciliation"),
    ),
    (
        "runkernel.adapters.stores.kit",
        "What a store of your own calls: the judgment of an append, the line codec, the lease rules and "
        "work discovery, the version rules (it also re-exports the records, errors and kernel values a store holds).",
        (
            "judge_append", "commit_text", "commit_from_text", "LeaseRow", "acquired", "require_held", "taken_each", "renewed_each",
            "commit_writer", "checked_release", "checked_duration", "is_own_landed_commit", "summary_of",
            "awaited_children", "has_work", "HistoryKeys", "snapshot_text", "snapshot_from_text",
            "answered_ticket", "AnswerPending", "may_drive", "checked_acceptance", "WorkerRecord", "FORGET_AFTER",
        ),
    ),
    ("runkernel.adapters.stores.memory", "The in-memory store (``memory:``).", ("MemoryStore",)),
    ("runkernel.adapters.stores.sqlite", "The embedded SQLite store (``sqlite:///path``).", ("SqliteStore",)),
    ("runkernel.adapters.stores.postgres", "The PostgreSQL store (the ``postgres`` extra).", ("PostgresStore",)),
    (
        "runkernel.adapters.stores.postgres.schema",
        "Creating and upgrading a PostgreSQL store's schema (``runkernel db``).",
        ("init_postgres", "migrate_postgres"),
    ),
    ("runkernel.adapters.stores.work", "What a store says about its Runs.", ("RunSummary",)),
    (
        "runkernel.adapters.drive.inbox",
        "Queueing a command in a store's inbox, for whoever drives the Run (``runkernel resume``).",
        ("submit_resume", "submit_end"),
    ),
    (
        "runkernel.adapters.drive.delegations",
        "A store's parent and child Runs (concurrent delegations).",
        ("parent_of", "ended_children", "parents_to_wake"),
    ),
    (
        "runkernel.conformance",
        "The store contract suite, for a store of your own (needs ``pytest``).",
        ("StoreContract", "StoreFactory"),
    ),
    (
        "runkernel.adapters.drive.actions",
        "The push-mode driver's actions and answers (the table of which action expects which "
        "answer is in the module's docstring), beyond those ``runkernel`` exports.",
        ("Action", "ChildRun", "Answer", "HistoryView", "DEFAULT_MAX_STEPS"),
    ),
    (
        "runkernel.adapters.drive.ports",
        "The pull-mode runtime's ports: protocols a model, a tool, a gate, hooks and an observer "
        "meet (structurally: no need to import them), and the rarer answers.",
        (
            "ModelPort", "StreamSink", "Tool", "ToolReply", "Lost", "Scheduled", "Delegated", "GatePort",
            "GateAnswer", "AllowAll", "HookPort", "Staging", "NoHooks", "Observer", "NullObserver", "IdSource",
            "SecretIds",
        ),
    ),
    ("runkernel.adapters.drive.runtime", "The pull-mode runtime's result.", ("RunOutcome",)),
    (
        "runkernel.adapters.drive.invocation",
        "The tool invocation in progress (``current_invocation``), and setting one in tests.",
        ("invocation_scope",),
    ),
    ("runkernel.adapters.drive.fork", "What ``fork`` answers.", ("ForkResult",)),
    ("runkernel.adapters.worker.loop", "The worker's report.", ("WorkerReport",)),
    (
        "runkernel.adapters.worker.outage",
        "How a worker rides out its store (``Worker(on_outage=...)`` hears these).",
        ("OutageBegan", "OutageEnded"),
    ),
    (
        "runkernel.adapters.worker.apps",
        "What ``runkernel worker --app MODULE:ATTR`` loads (a ``RuntimeApp`` is in ``runkernel``).",
        ("PushApp", "AsyncPushApp", "load_app", "version_of"),
    ),
    (
        "runkernel.adapters.worker.upgrade",
        "Whether new code of an app can continue its live Runs (``runkernel upgrade-check``), and "
        "recording it able to (``--accept``).",
        ("upgrade_check", "accept_upgrade", "UpgradeReport", "RunVerdict", "PolicyDifference"),
    ),
    (
        "runkernel.adapters.drive.lease_keeper",
        "Leases for a push-mode host of your own (``Driver(..., leases=LeaseKeeper(store, worker_id))``).",
        ("LeaseKeeper",),
    ),
    ("runkernel.specs.checker", "What ``check_trace`` answers.", ("Finding", "Verdict")),
)

#: The documented modules of the stores and their contract: with ``runkernel``,
#: ``runkernel.kernel``, ``runkernel.testing`` and ``runkernel.integrations.<framework>``,
#: the only modules the README, the docs and ``examples/`` may import
#: (``tests/proofs/test_public_imports.py``).
STORE_MODULES: tuple[str, ...] = (
    "runkernel.adapters.stores.contract",
    "runkernel.adapters.stores.kit",
    "runkernel.adapters.stores.memory",
    "runkernel.adapters.stores.sqlite",
    "runkernel.adapters.stores.postgres",
    "runkernel.adapters.stores.postgres.schema",
    "runkernel.conformance",
)

#: Type aliases carry no docstring of their own; their entry says what they are.
ALIAS_DOCS: dict[str, str] = {
    "Action": "`Infer | RunCall | RunCalls | CheckStatus | Fence | WaitFor | ChildrenRunning | Done`: what every "
    "method of a "
    "push-mode driver returns (see the table in `runkernel.adapters.drive.actions`).",
    "JsonValue": "Any JSON value: `None`, `bool`, `int`, `float`, `str`, a list of them or a "
    "`dict` with `str` keys. Arguments, results and message contents are JSON values.",
    "RunState": "`Running | Awaiting | Ended`: a Run's state.",
    "CallStatus": "`CallRequested | CallExecuting | CallAwaiting | CallCompleted | CallIndeterminate`: "
    "a tool call's status.",
    "Input": "Every input `decide` takes: `Activate | InferenceResult | GateVerdict | ToolFinished | "
    "StatusReport | ResumeCommand | DeadlinePassed | EndRequest | ChildEnded`.",
    "Effect": "Every effect a `Decision` lists: `Commit | RunHook | RequestInference | RunGate | Execute | "
    "QueryStatus | NotifyWait | PublishResults | DeliverTerminus | StartChild | CancelChild`.",
    "GateOutcome": "`Allow | Block | Supply | RequireWait`: the kernel's words for a gate's `Permit`, "
    "`Refuse`, `Provide` and `Hold`.",
    "ToolOutcome": "`ToolOutput | ToolFailure | ToolDelegated | ToolScheduled | ToolOutcomeLost`: the "
    "kernel's words for a tool's `Returned`, `Failed`, `Delegated`, `Scheduled` and `Lost`.",
    "ResumePayload": "`Approve | Deny | ProvideInput | ExternalResult | DelegationResult | TimerFired`: "
    "what answers a wait (`resume(payload)`).",
    "ToolReply": "`Returned | Failed | Delegated | Scheduled | Lost`: what a pull-mode tool's `run` returns "
    "(a push-mode host says the same with `call_returned`, `call_failed`, `call_delegated`, "
    "`call_scheduled`, `call_lost`).",
    "GateAnswer": "`Permit | Refuse | Provide | Hold`: what a gate's `check(run_id, call)` returns, in "
    "both modes.",
}

#: A constant whose ``repr`` is longer than this is named by its type instead.
_SHORT_REPR = 60

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _doc(value: Any) -> str:
    doc = value.__dict__.get("__doc__") if isinstance(value, type) else getattr(value, "__doc__", None)
    if not doc:
        raise ValueError(f"public name {getattr(value, '__name__', value)!r} has no docstring")
    return inspect.cleandoc(doc)


def _annotation(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return text.replace("runkernel.kernel.", "").replace("typing.", "")


def _default(value: Any) -> str:
    if value is attrs.NOTHING:
        return "(made fresh)"  # an attrs factory
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if inspect.isfunction(value) or inspect.isclass(value):
        return value.__name__
    if attrs.has(type(value)):
        try:
            plain = value == type(value)()
        except TypeError:
            plain = False
        return f"{type(value).__name__}()" if plain else f"{type(value).__name__}(...)"
    return _ADDRESS.sub("", repr(value))


def _signature(value: Any) -> str:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return "(...)"
    parts = []
    star_done = False
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if parameter.kind is parameter.VAR_POSITIONAL:
            star_done = True
            parts.append(f"*{parameter.name}")
            continue
        if parameter.kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
            continue
        text = parameter.name
        annotation = _annotation(parameter.annotation)
        if annotation:
            text += f": {annotation}"
        if parameter.default is not inspect.Parameter.empty:
            text += f" = {_default(parameter.default)}"
        parts.append(text)
    returned = _annotation(signature.return_annotation)
    arrow = f" -> {returned}" if returned and returned != "None" else ""
    return f"({', '.join(parts)}){arrow}"


def _members(cls: type) -> list[str]:
    """Public methods and properties defined by the class itself, with their summaries."""
    lines = []
    own = [base for base in cls.__mro__ if base.__module__.startswith("runkernel")]
    seen: set[str] = set()
    for name, member in [item for owner in own for item in vars(owner).items()]:
        if name in seen:
            continue
        seen.add(name)
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            if member.__doc__:
                lines.append(f"- `{name}` (property): {_first_line(member.__doc__)}")
        elif isinstance(member, classmethod) and (doc := member.__func__.__doc__):
            lines.append(f"- `{name}{_signature(member.__func__)}` (classmethod): {_first_line(doc)}")
        elif inspect.isfunction(member) and member.__doc__:
            prefix = "async " if inspect.iscoroutinefunction(member) else ""
            lines.append(f"- `{prefix}{name}{_signature(member)}`: {_first_line(member.__doc__)}")
    return lines


def _first_line(doc: str) -> str:
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _is_alias(value: Any) -> bool:
    """A type alias (``A | B``, ``Callable[...]``, ``Any``) rather than a class or a value."""
    return isinstance(value, (types.UnionType, types.GenericAlias)) or (
        not isinstance(value, type) and type(value).__module__ == typing.__name__
    )


def _entry(name: str, value: Any, module: str = "runkernel") -> list[str]:
    if name in ALIAS_DOCS:
        return [f"### `{name}`", "", ALIAS_DOCS[name], ""]
    if _is_alias(value):
        return [f"### `{name}`", "", _constant_doc(name, module), ""]
    if isinstance(value, type) and issubclass(value, enum.Enum):
        listed = ", ".join(f"`{m.name}` = `{m.value!r}`" for m in value)
        return [f"### `{name}` (enum)", "", _doc(value), "", f"Members: {listed}.", ""]
    if isinstance(value, type) and issubclass(value, BaseException):
        bases = ", ".join(b.__name__ for b in value.__bases__)
        return [f"### `{name}` (exception: {bases})", "", _doc(value), ""]
    if isinstance(value, type):
        protocol = getattr(value, "_is_protocol", False)
        heading = f"### `{name}` (protocol)" if protocol else f"### `{name}{_signature(value)}`"
        lines = [heading, "", _doc(value), ""]
        members = _members(value)
        return lines + (members + [""] if members else [])
    if callable(value):
        return [f"### `{name}{_signature(value)}`", "", _doc(value), ""]
    shown = _ADDRESS.sub("", repr(value))
    heading = f"`{name} = {shown}`" if len(shown) <= _SHORT_REPR else f"`{name}` ({type(value).__name__})"
    return [f"### {heading}", "", _constant_doc(name, module), ""]


def _constant_doc(name: str, module_name: str) -> str:
    """A constant's (or alias's) ``#:`` comment in the module that defines it: ``module_name``
    or, for a package, one of its modules."""
    candidates = [module_name, *sorted(m for m in sys.modules if m.startswith(f"{module_name}."))]
    for candidate in candidates:
        source = inspect.getsource(sys.modules[candidate]).splitlines()
        for index, line in enumerate(source):
            if line.startswith(f"{name} ") or line.startswith(f"{name}:"):
                comments: list[str] = []
                back = index - 1
                while back >= 0 and source[back].startswith("#:"):
                    comments.insert(0, source[back][2:].strip())
                    back -= 1
                if comments:
                    return " ".join(comments)
    raise ValueError(f"public constant {name!r} has no '#:' comment")


def documented() -> dict[str, set[str]]:
    """Every documented name, by the module it is documented in."""
    found: dict[str, set[str]] = {"runkernel": set(runkernel.__all__), "runkernel.kernel": set(runkernel.kernel.__all__)}
    for module_name, _purpose, names in MODULES:
        found.setdefault(module_name, set()).update(names)
    return found


def render() -> str:
    """The whole reference page."""
    lines = [
        "# runkernel API reference",
        "",
        "Generated from the docstrings by `python -m runkernel.cli.api_doc > docs/api.md`;",
        "do not edit by hand. The host's API is importable from `runkernel` (first part); the",
        "kernel's vocabulary from `runkernel.kernel` (second part); the rest from the module",
        "each entry of the third part names.",
        "",
        "# `runkernel`: the host's API",
        "",
    ]
    for title, groups in runkernel.SECTIONS:
        lines += [f"## {title}", ""]
        for module_name, names in groups:
            module = importlib.import_module(module_name)
            for name in names:
                lines += _entry(name, getattr(module, name), module_name)
    lines += ["# `runkernel.kernel`: the kernel's vocabulary", "", _first_line(runkernel.kernel.__doc__ or ""), ""]
    for title, names in runkernel.kernel.SECTIONS:
        lines += [f"## {title}", ""]
        for name in names:
            lines += _entry(name, getattr(runkernel.kernel, name), "runkernel.kernel")
    lines += ["# Other documented modules", ""]
    for module_name, purpose, names in MODULES:
        module = importlib.import_module(module_name)
        lines += [f"## `{module_name}`", "", purpose, ""]
        for name in names:
            lines += _entry(name, getattr(module, name), module_name)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
