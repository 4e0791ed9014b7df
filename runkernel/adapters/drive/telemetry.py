"""What a drive tells an observer of its own progress (traces and metrics), at a few
well-defined points of the one interpreter (``core``) and its store operations
(``store_ops.StoreOps``).

``Telemetry`` is the interface and its own no-op default: every method does nothing, so
a host without an observer pays one call per point and imports nothing. The
OpenTelemetry observer (``runkernel.integrations.otel``, behind the ``otel`` extra)
overrides them. An observer never decides anything and never writes to the store; the
only thing it adds to a Run is its trace context, which the store keeps beside the
activation commit, outside the commit log (``trace_context``), so one Run reads as one
trace across processes and crashes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runkernel.adapters.drive.actions import Action, RunCall
    from runkernel.adapters.drive.protocol import Report
    from runkernel.adapters.stores.contract import InboxEntry
    from runkernel.kernel.recover import RecoveryDecision
    from runkernel.kernel.state import RunSnapshot, ThreadCommit


_NOTHING: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


class Telemetry:
    """An observer of drives; this base class observes nothing (the default).

    Subclass it and pass it as ``telemetry=`` to a ``Worker``, ``Runtime``, ``Driver``
    or ``AsyncDriver``. Every method is called on the driving thread, synchronously, and
    must not raise: what it records is never a Run's truth."""

    #: read each Run's stored trace context when a drive picks it up (one keyed read per
    #: pick-up, none per commit); False for the default, which reads nothing
    reads_trace: bool = False

    def drive_began(self, run_id: str, trace_context: str | None, *, start: bool) -> None:
        """A drive of ``run_id`` began: a ``start`` (its activation comes next), or a
        pick-up with the trace context stored with the Run's activation (None if none)."""

    def drive_ended(self, run_id: str) -> None:
        """The drive of ``run_id`` stopped (the Run waits, ended, or its host let go)."""

    def drive_failed(self, run_id: str, reason: str, error: BaseException) -> None:
        """A worker's drive of ``run_id`` stopped on ``error`` (``reason``: conflict,
        lease_lost or error)."""

    def activation_context(self, commit: ThreadCommit) -> str | None:
        """The trace context to store with ``commit``, a Run's activation (None: store
        none). A child's activation may name its parent's drive."""
        return None

    def commit(self, commit: ThreadCommit, prev: RunSnapshot | None) -> contextlib.AbstractContextManager[None]:
        """Around the store's write of ``commit`` (``prev``: the Run's snapshot before);
        the default's is one shared ``nullcontext``."""
        return _NOTHING

    def handed(self, action: Action) -> None:
        """The core handed ``action`` to its host (an attempt begins)."""

    def executing(self, action: RunCall) -> None:
        """A tool attempt's executor starts, under ``action.lease_epoch`` if leased."""

    def reported(self, action: Action, report: Report, refusal: str | None) -> None:
        """The host answered ``action`` with ``report``: accepted (``refusal`` None) or
        refused with the reason given to the host."""

    def recovered(self, run_id: str, plan: RecoveryDecision) -> None:
        """``recover`` planned the Run's next move (its row, and the effects it chose)."""

    def settled(self, entry: InboxEntry, outcome: str) -> None:
        """An inbox command (a resume, a cancel) was applied or refused."""

    def taken_over(self, run_id: str, epoch: int) -> None:
        """A worker took over ``run_id``'s lease from another worker (at ``epoch``)."""


#: The default observer: nothing recorded, nothing imported.
NO_TELEMETRY = Telemetry()


__all__ = ["NO_TELEMETRY", "Telemetry"]
