"""Every error runkernel raises on purpose, in one tree told apart by whose fault it is.

``except runkernel.RunkernelError`` catches them all. Below the root, three branches say
whose fault an error is, and so what to do about it (as h11's ``LocalProtocolError`` and
``RemoteProtocolError`` do):

- ``UsageError``: the host misused the API or misconfigured something. Fix the calling
  code or the configuration; trying again unchanged fails again.
- ``PeerError``: something from outside the host's call broke a rule: a refused command,
  an illegal commit, a port's answer the kernel refused, input that is not a trace, a
  Run ended by someone else. Nothing was committed for it; the message (and the
  ``rejection``, where there is one) says which rule.
- ``StoreError``: the store failed, refused a write that lost a race, or refused a lease.
  The Run is as committed; driving it again from the store is safe.

and ``KernelBug``, a bug in runkernel itself (the kernel built a commit its own judge
rejects). The root and the branches cannot be raised themselves. Each class keeps the
Python base that callers caught before the tree existed (``UnknownTool`` is a
``ValueError``, ``RuntimeProtocolError`` a ``RuntimeError``, ``KernelBug`` an
``AssertionError`` ...); the modules that raise them re-export them under their old names.

Why this module is long: the tree is one unit, every error a class with the docstring
that says whose fault it is; split, the tree would no longer be read in one place.

Deliberately not ``RunkernelError``s, because none reaches a host as an error: the CLI's
``CliError`` (always turned into one line on stderr and an exit code), the judge's
internal short-circuit ``Illegal`` (returned as a ``Rejection``), the PostgreSQL store's
private ``_ConnectionLost``, and two test instruments of ``runkernel.testing`` meant to
escape every handler of runkernel's own errors: ``SimulatedCrash`` (the death of a
process, a ``BaseException`` so that no ``except Exception`` catches it either) and the
simulation's ``EnvironmentFailure``. The integration's errors (``runkernel.integrations.pydantic_ai``)
live in the integration, under the same branches.

This module imports nothing of runkernel, not even for annotations, so every room may
import it, the pure kernel first. The records an error carries belong to the rooms that
raise it, so they are described here by what is read of them: a ``Refusal`` is a
kernel ``Rejection`` (``runkernel.kernel``), a ``LeaseRecord`` a store's ``Lease``
(``runkernel.adapters.stores.contract``), and ``HostProtocolError.action`` the push-mode
``Action`` that stands.

Why this module is long: the whole error tree is one module that imports nothing of
runkernel, and each error says what it means and how to fix it.
"""

from __future__ import annotations

import enum
from typing import Protocol


class Refusal(Protocol):
    """What an error says of the kernel's refusal it carries (a ``runkernel.kernel.Rejection``
    is one): the rule broken (a ``runkernel.kernel.Rule``) and why."""

    @property
    def rule(self) -> enum.Enum: ...

    @property
    def message(self) -> str: ...


class LeaseRecord(Protocol):
    """What a lease error says of the lease it carries (a store's ``Lease`` is one)."""

    @property
    def run_id(self) -> str: ...

    @property
    def worker_id(self) -> str: ...

    @property
    def epoch(self) -> int: ...

    @property
    def expires_at(self) -> float: ...


class RunkernelError(Exception):
    """Base class of every error runkernel raises on purpose. Never raised itself:
    catch it, or one of its branches ``UsageError``, ``PeerError``, ``StoreError``."""

    def __new__(cls, *args: object, **kwargs: object) -> RunkernelError:
        if cls in _BASES:
            raise TypeError(f"{cls.__name__} is a base class; raise one of its subclasses")
        return super().__new__(cls, *args, **kwargs)


# --- the host's fault -----------------------------------------------------------------


class UsageError(RunkernelError):
    """The host's fault: it misused the API or misconfigured something (a tool without a
    policy, a bad store URL, an answer to a question the driver did not ask). Nothing
    was committed for it; fix the calling code or the configuration. Never raised
    itself."""


class DriverError(UsageError):
    """The host's fault: the push-mode driver was configured or used in a way it refuses
    (no Run started yet, a second call while one is in flight, a sync gate on an
    ``AsyncDriver``...). Nothing was committed for it; the message says what to call."""


class UnknownTool(DriverError, ValueError):
    """The host's fault: the model asked for a tool the driver has no policy for.
    Nothing was committed: every tool needs a declared recovery policy, because recovery
    applies it later. Give the driver a policy for every tool the model may call."""


class HostProtocolError(DriverError):
    """The host's fault: its answer does not fit the action it was given, or the kernel
    refused it (``rejection`` says which rule). Nothing was committed; the same action
    stands, so answer it again, correctly."""

    def __init__(self, message: str, rejection: Refusal | None = None, action: object = None) -> None:
        super().__init__(message)
        self.rejection = rejection
        self.action = action


class BadToolPolicy(UsageError, ValueError):
    """The host's fault: a tool's policy is neither a ``ToolPolicy`` nor one of the
    strings ``"replay"``, ``"reconnect"``, ``"indeterminate"``. ``tool`` names the tool
    and ``value`` is what was given."""

    def __init__(self, tool: str, value: object) -> None:
        super().__init__(
            f"tool {tool!r}: {value!r} is not a policy; give a ToolPolicy or one of "
            "'replay', 'reconnect', 'indeterminate'"
        )
        self.tool = tool
        self.value = value


class BadStoreUrl(UsageError):
    """The host's fault: the URL names no store this runkernel can open (an unknown
    scheme, no file, a store kind without its extra installed). Fix the URL, or install
    the extra the message names."""


class UnknownRun(UsageError):
    """The host's fault: it named a Run the store has no commit for (``pick_up`` or
    ``resume`` of a Run never started, or a mistyped id). Start the Run first, or check
    the id (``runkernel runs`` lists them)."""


class ForkRefused(UsageError):
    """The host's fault: the fork rules refuse the fork asked for (``refusal`` says why,
    ``calls`` names the calls that refuse it: pass ``abandon_open_calls`` to close them
    Indeterminate in the fork instead). Nothing was written."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal
        self.calls: tuple[str, ...] = tuple(getattr(refusal, "calls", ()))


class AppLoadError(UsageError):
    """The host's fault: ``MODULE:ATTR`` does not name a worker app (no such module or
    attribute, or an object that is not an app). The message says which and what an
    app is."""


class VersionRequired(UsageError, ValueError):
    """The host's fault: an app whose tools are not all known up front (an MCP server
    lists its tools while the agent runs) declared no ``version``, so its tool table's
    digest cannot name its code. The message names the app and how to declare one."""


class BadScenario(UsageError, ValueError):
    """The host's fault: a crash-test scenario (a JSON file or a ``Scenario`` built in
    code) that cannot be played. The message names the first thing wrong and where."""


class CrashTestRefused(UsageError):
    """The host's fault: a crash test that cannot run (a tool named at-most-once that the
    app lacks, scripted turns for an app that calls its own model, a crash-free Run that
    already fails)."""


class UpgradeBlocked(UsageError):
    """The operator's fault: ``upgrade-check --accept`` (``accept_upgrade``) asked to record
    a new app version as able to drive Runs it cannot continue (a tool of an open call
    is gone, a gate or hooks are missing). Nothing was recorded; the message names the
    blocked Runs."""


class NotDeterministic(UsageError):
    """The host's fault: two crash-free plays of a crash-test scenario committed different
    histories, so crashes cannot be judged against the app (a real LLM, the wall clock,
    randomness). Script the model's turns in the scenario instead."""


class NoInvocation(UsageError, LookupError):
    """The host's fault: ``current_invocation()`` was called outside an executor runkernel
    started. Call it inside a tool body, or set one with ``invocation_scope`` (tests). A
    ``LookupError`` too, as the Pydantic AI integration's own accessor raised."""


# --- a peer's fault -------------------------------------------------------------------


class PeerError(RunkernelError):
    """A peer's fault: something from outside the host's call broke a rule of the design
    (a refused command, an illegal commit, a port's answer the kernel refused, input that
    is not a trace), or ended the Run. Nothing was committed for it; the message (and
    ``rejection`` where there is one) says which rule. Never raised itself."""


class RejectedError(PeerError):
    """A peer's fault: the kernel refused an input (``rejection`` says which rule). Raised
    by the convenience wrappers that turn a ``Rejection`` into an exception."""

    def __init__(self, rejection: Refusal) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


class IllegalCommit(PeerError):
    """The writer's fault: the commit is not a legal successor of the committed state
    (``rejection`` says which rule). Nothing was written; a commit built by ``decide`` or
    ``recover`` from the committed state is legal, so build it that way."""

    def __init__(self, rejection: Refusal) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


class RuntimeProtocolError(PeerError, RuntimeError):
    """A port's fault: a port of the pull-mode runtime (model, tool, gate, hooks) answered
    something the kernel refused (``rejection`` says which rule): a bug in that port, not
    a crash. Nothing was committed for the answer; fix the port."""

    def __init__(self, rejection: Refusal) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


class TraceFormatError(PeerError, ValueError):
    """The sender's fault: the input is not a ``runkernel/2`` line; ``path`` names the
    offending field. Nothing was judged past it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class IllegalShape(TraceFormatError):
    """The sender's fault: a well-typed line whose shape breaks a rule (a ticket on a
    Running disposition, duplicate call ids, a Requested call with an attempt): illegal,
    not unreadable. ``rule`` says which."""

    def __init__(self, rule: enum.Enum, path: str, message: str) -> None:
        super().__init__(path, message)
        self.rule = rule


class NotATrace(PeerError):
    """The sender's fault: the bytes cannot be a ``runkernel/2`` line (not strict JSON:
    invalid UTF-8, a duplicate key, NaN, too deep or too long)."""


class ConversationBusy(PeerError):
    """Another's doing: the conversation (Thread ``thread_id``) already has a Run that is
    not Ended, ``run_id``, so a new Run cannot start in it: another submission (this
    process's or another's, at the same moment or earlier) holds the conversation. Nothing
    was committed for this one. Wait for that Run to end, or continue it (answer its
    wait, resume it) instead of starting a new one. Raised alike by every agent
    integration (Pydantic AI, OpenAI Agents SDK)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        super().__init__(
            f"conversation {thread_id!r} is held by run {run_id!r}, which is not Ended: a new Run cannot start in it;"
            " wait for that Run to end, or continue it (resume, or answer its wait)"
        )
        self.thread_id = thread_id
        self.run_id = run_id


class NotIJson(PeerError, ValueError):
    """The sender's fault: the value is outside I-JSON (RFC 7493), so it has no canonical
    form to digest (a resume command with NaN, an integer beyond 2**53, a lone
    surrogate). Send a JSON value inside I-JSON."""


# --- a store failure ------------------------------------------------------------------


class StoreError(RunkernelError):
    """A store failure: the store could not be reached, is damaged, or refused a write
    or a lease because another writer got there first. The Run is as committed; drive it
    again from the store. Never raised itself."""


class CommitConflict(StoreError):
    """Another writer won: identity or expected version did not match (``rejection``
    says which). Nothing was written; read the committed state again and go on from it."""

    def __init__(self, rejection: Refusal) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


class AnswerPending(StoreError):
    """Another answer won: the wait's ticket already has an answer pending in the store's
    inbox (command ``entry_id``), and a wait takes one answer. Nothing was queued;
    ``runkernel inspect`` shows the pending answer, which the runtime applies."""

    def __init__(self, entry_id: int, ticket_id: str) -> None:
        super().__init__(f"ticket {ticket_id!r} already has an answer pending: command {entry_id}")
        self.entry_id = entry_id
        self.ticket_id = ticket_id


class StoreUnavailable(StoreError):
    """The store could not be reached or failed mid-write; the write did not happen.
    Try again once the store is back."""


class HostUnresolved(StoreUnavailable):
    """The store's host name does not resolve (yet): ``host`` names it. A database
    container may still be starting, so a worker rides it out with a line of its own;
    ``runkernel worker --once`` gives up once its backoff reached its cap."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(message)
        self.host = host


class SchemaError(StoreError):
    """The database is not a runkernel store, or has a schema this version does not know.
    Point at the right database, or migrate it (``runkernel db migrate``)."""


class DamagedStore(StoreError):
    """A stored value cannot be decoded, or the stored facts contradict each other (a gap
    or repeat in a Thread's versions, a snapshot that disagrees with the log). The
    message names the row; nothing is answered from a damaged store."""


class LeaseError(StoreError):
    """The store refused a lease: the caller must stop driving the Run (another worker
    continues it from committed facts). Never raised itself."""


class LeaseHeld(LeaseError):
    """Another worker holds a valid lease on the Run (by the store's clock): it may not
    be taken over, and no commit without that lease is accepted. Nothing was written."""

    def __init__(self, holder: LeaseRecord) -> None:
        super().__init__(
            f"lease-held: run {holder.run_id!r} is leased to {holder.worker_id!r} "
            f"(epoch {holder.epoch}) until store time {holder.expires_at:.3f}"
        )
        self.holder = holder


class LeaseLost(LeaseError):
    """The caller's lease is no longer valid: it expired, was released, or another
    worker took the Run over (a higher epoch). Nothing was written."""

    def __init__(self, lease: LeaseRecord, why: str) -> None:
        super().__init__(
            f"lease-lost: the lease of {lease.worker_id!r} on run {lease.run_id!r} "
            f"(epoch {lease.epoch}) is gone: {why}"
        )
        self.lease = lease


class DriverStopped(StoreError):
    """A store call of the push-mode driver failed or lost (the store's exception is the
    ``__cause__``); the driver dropped everything it believed. ``next_action()`` picks
    the Run up again from the store alone, exactly as a fresh driver would."""


# --- a bug in runkernel ---------------------------------------------------------------


class KernelBug(RunkernelError, AssertionError):
    """A bug in runkernel: ``decide`` or ``recover`` built a commit that commit validation
    rejects. Nothing was committed; report it with the Run's trace
    (``runkernel export``)."""


#: The classes that only group others: raising one is refused.
_BASES: frozenset[type[RunkernelError]] = frozenset({RunkernelError, UsageError, PeerError, StoreError, LeaseError})

#: The three branches: every concrete error is under exactly one, or is a ``KernelBug``.
BRANCHES: tuple[type[RunkernelError], ...] = (UsageError, PeerError, StoreError)

__all__ = [
    "BRANCHES",
    "AnswerPending",
    "AppLoadError",
    "BadScenario",
    "BadStoreUrl",
    "BadToolPolicy",
    "CommitConflict",
    "ConversationBusy",
    "CrashTestRefused",
    "DamagedStore",
    "DriverError",
    "DriverStopped",
    "HostProtocolError",
    "HostUnresolved",
    "IllegalCommit",
    "IllegalShape",
    "KernelBug",
    "LeaseError",
    "LeaseHeld",
    "LeaseLost",
    "NoInvocation",
    "NotATrace",
    "NotDeterministic",
    "NotIJson",
    "PeerError",
    "RejectedError",
    "RunkernelError",
    "RuntimeProtocolError",
    "SchemaError",
    "StoreError",
    "StoreUnavailable",
    "TraceFormatError",
    "UnknownRun",
    "UnknownTool",
    "UpgradeBlocked",
    "UsageError",
    "VersionRequired",
]
