"""What a PostgreSQL store learnt in its own last commit's transaction, and the history
answers it read since it last fixed what the next commit is judged against: the
reads a drive would otherwise send right after a commit, answered without a round
trip. Each answer holds only while this store has written nothing else since (any other
write, a reconnect and a new commit forget it), and each is one the database gave in
the transaction that wrote the commit, or a fact of the history that only a commit of
the Run can change.

- The Run's **pending inbox**, read by the commit's last statement: the drive's next look
  at the inbox (``PostgresStore.pending_seen_in_commit``), once.
- The seconds the commit's **lease** had left by the server's clock, read by the
  commit's lease check: the W1 re-check before an executor starts
  (``PostgresStore.lease_left_in_commit``) is that figure less the time elapsed since
  the commit was sent, by this machine's boot-time clock (which, unlike the monotonic
  one, keeps counting while the machine is suspended). The server read its clock after
  the commit was sent, so the figure can only be low, as long as the server's clock runs
  at the rate of real time, which every lease assumes (a lease is a span of the server's
  clock). It is not used once the commit is older than ``FRESH`` seconds, nor when it
  falls under the margin: then the store is asked, as before.
- Whether the commit **compacted** the Run's inbox: a commit that ends the Run deletes
  its settled refusals in its own transaction, so the drive's compaction right after it
  has nothing left to delete (``PostgresStore.compact_commands``).
- The **history answers** (a closed batch, a used ticket, an applied resume) read after
  the head and snapshot the next commit is judged against were fixed (``HistoryMemo``).
  History rows are written only by the Run's own commits, each of which moves the
  Thread's head; a commit judged with these answers is sent with the expected version
  of that head, so if the history changed since, the database refuses the commit and it
  is judged again against fresh rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from runkernel.adapters.stores.contract import InboxEntry, Lease
from runkernel.kernel.history import History


#: Seconds after which a commit's figure for its lease is no longer used: the re-check
#: that follows the commit is asked of the store instead.
FRESH = 1.0


def _elapsed_clock() -> float:
    """Seconds of real time, counting while the machine is suspended (Linux's boot-time
    clock; elsewhere the monotonic clock)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


elapsed_clock: Callable[[], float] = _elapsed_clock if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic


class CommitEcho:
    """The answers of this store's last commit (see the module's text)."""

    def __init__(self, clock: Callable[[], float] = elapsed_clock) -> None:
        self.clock = clock
        self._inbox: tuple[str, int, list[InboxEntry]] | None = None
        #: (run id, worker id, epoch, seconds left by the server's clock, monotonic send time)
        self._lease: tuple[str, str, int, float, float] | None = None
        self._compacted: str | None = None

    def forget(self) -> None:
        """This store wrote something else, reconnected, or is sending a commit."""
        self._inbox = self._lease = self._compacted = None

    def committed(
        self,
        run_id: str,
        version: int,
        pending: list[InboxEntry],
        lease: tuple[Lease, float, float] | None,
        compacted: bool,
    ) -> None:
        """The commit of ``version`` of ``run_id`` was written; ``lease`` is (its lease,
        the seconds it had left by the server's clock, ``clock()`` when the commit was
        sent), None for an unleased commit or one that released its lease."""
        self._inbox = (run_id, version, pending)
        self._lease = None if lease is None else (run_id, lease[0].worker_id, lease[0].epoch, lease[1], lease[2])
        self._compacted = run_id if compacted else None

    def pending(self, run_id: str, version: int) -> list[InboxEntry] | None:
        """The pending commands the commit of ``version`` saw, once."""
        seen, self._inbox = self._inbox, None
        if seen is None or seen[:2] != (run_id, version):
            return None
        return seen[2]

    def lease_left(self, lease: Lease) -> float | None:
        """Seconds ``lease`` is still valid at least, by the last commit's check and the
        time elapsed since it was sent; None if the last commit did not check it, or was
        sent ``FRESH`` seconds ago or more."""
        seen = self._lease
        if seen is None or seen[:3] != (lease.run_id, lease.worker_id, lease.epoch):
            return None
        elapsed = self.clock() - seen[4]
        return None if elapsed >= FRESH else seen[3] - elapsed

    def compacted(self, run_id: str) -> bool:
        """Whether the last commit compacted ``run_id``'s inbox, once."""
        found, self._compacted = self._compacted == run_id, None
        return found


class HistoryMemo:
    """History answers read since the store last fixed what its next commit is judged
    against (``PostgresStore._written``); cleared whenever that is fixed again."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str, str], Any] = {}

    def clear(self) -> None:
        self._answers.clear()

    def recording(self, run_id: str, history: History) -> History:
        """``history``, each answer it reads kept."""
        return _Recorded(run_id, history, self._answers, always_read=True)

    def answering(self, run_id: str, history: History) -> History:
        """``history``, answered from what was kept where it can be (else read and kept)."""
        return _Recorded(run_id, history, self._answers, always_read=False)


class _Recorded:
    def __init__(
        self, run_id: str, base: History, answers: dict[tuple[str, str, str], Any], *, always_read: bool
    ) -> None:
        self._run_id = run_id
        self._base = base
        self._answers = answers
        self._always_read = always_read  # a drive's look-up; else the judge's, from the memo first

    def _answer(self, kind: str, key: str, read: Callable[[str], Hashable]) -> Any:
        slot = (kind, self._run_id, key)
        if not self._always_read and slot in self._answers:
            return self._answers[slot]
        answer = self._answers[slot] = read(key)
        return answer

    def ticket_used(self, ticket_id: str) -> bool:
        used: bool = self._answer("ticket", ticket_id, self._base.ticket_used)
        return used

    def batch_closed(self, batch_id: str) -> bool:
        closed: bool = self._answer("batch", batch_id, self._base.batch_closed)
        return closed

    def applied_digest(self, ticket_id: str) -> str | None:
        digest: str | None = self._answer("resume", ticket_id, self._base.applied_digest)
        return digest
