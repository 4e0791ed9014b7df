"""How a worker rides out its store (Workers and leases, W6): a database
restart, a dropped connection, a server down, a SQLite lock held past the busy timeout,
a host name that does not resolve yet (a database container still starting: its own
line, and ``gives_up()`` once a try after the capped backoff failed, for ``--once``).

A store call that fails with ``StoreUnavailable`` (polling, waiting for work, taking a
lease, a commit) begins an **outage**: it is reported once (``OutageBegan``), the worker
stops the pass it was making and tries again after a capped exponential backoff
(``OUTAGE_FIRST_DELAY`` doubled up to ``OUTAGE_MAX_DELAY`` seconds), and every failed try
meanwhile is only counted. The outage ends, reported once (``OutageEnded``), at the
first poll over the store that answers (``answered``); a drive that poll started which
fails begins a new outage, so each restart of a server is one outage, however long the
pass of drives. Nothing is lost meanwhile: a commit either was
acknowledged or is judged again by identity and version on the next drive (W4), and a
lease the worker could not release only expires (W2).

Also here: ``RunBackoff``, which Runs a worker skips after their drives failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from attrs import frozen

from runkernel.errors import HostUnresolved

#: Seconds before the first retry of an outage, doubled at each failed retry...
OUTAGE_FIRST_DELAY = 0.5
#: ... up to this many seconds between retries.
OUTAGE_MAX_DELAY = 10.0

#: The most polls ``Worker.run()`` skips a Run that keeps failing (doubled from 1 per failure).
MAX_SKIPPED_POLLS = 64


@frozen
class OutageBegan:
    """The worker's store stopped answering: ``error`` is the store's one-line reason;
    ``host`` the store's host name when it is one that does not resolve (yet). The
    worker retries with a capped backoff until it answers again."""

    error: str
    host: str | None = None


@frozen
class OutageEnded:
    """The worker's store answers again after ``seconds``; ``retries`` tries failed
    meanwhile, ``interrupted`` drives were cut short by the outage (each continues from
    committed facts), and ``folded`` messages of the store's client library (psycopg's
    pool warnings) were folded into this outage instead of being printed."""

    seconds: float
    retries: int
    interrupted: int
    folded: int


OutageEvent = OutageBegan | OutageEnded


class StoreOutage:
    """Whether a worker's store is out, since when, and how long to wait before the next
    try. ``on_change`` hears ``OutageBegan`` and ``OutageEnded``, once each per outage.
    A worker's slots share one: a drive in any of them may report a failure, from its
    own thread (one outage reported once, whichever slot saw it first)."""

    def __init__(
        self,
        on_change: Callable[[OutageEvent], None] | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        first_delay: float = OUTAGE_FIRST_DELAY,
        max_delay: float = OUTAGE_MAX_DELAY,
    ) -> None:
        self._on_change = on_change
        self._monotonic = monotonic
        self.first_delay = first_delay
        self.max_delay = max_delay
        #: how many outages began (each reported once)
        self.count = 0
        self._since: float | None = None
        self._retries = 0
        self._interrupted = 0
        self._folded = 0
        #: whether the current pass over the store hit the outage
        self._hit = False
        self._lock = threading.RLock()
        #: every failure heard, in any slot (a change tells the dispatcher a drive met the outage)
        self.failures = 0
        #: the host name the last failure found unresolved, if it was that
        self._unresolved: str | None = None
        #: whether the last failure came after a wait of the capped backoff
        self._capped = False

    @property
    def active(self) -> bool:
        """Whether the store is out (an outage began and has not ended)."""
        return self._since is not None

    def failed(self, error: BaseException, *, drive: bool = False) -> None:
        """A store call failed with ``error`` (a drive's, if ``drive``): the outage
        begins (reported) or goes on (counted)."""
        with self._lock:
            self._failed(error, drive)

    def _failed(self, error: BaseException, drive: bool) -> None:
        retried, self._hit = self._hit, True  # a pass that already failed retries no more
        self.failures += 1
        if drive:
            self._interrupted += 1
        self._unresolved = error.host if isinstance(error, HostUnresolved) else None
        if self._since is None:
            self._since = self._monotonic()
            self._retries = 0
            self._capped = False
            self.count += 1
            if self._on_change is not None:
                self._on_change(OutageBegan(_one_line(error), self._unresolved))
        elif not retried:  # one retry a pass: a worker's slots failing at once are one try
            self._capped = self.delay() >= self.max_delay  # this try came after a wait at the cap
            self._retries += 1

    def gives_up(self) -> bool:
        """Whether a worker that gives up (``--once``) stops here: the store's host name
        still does not resolve on a try made after a wait of the capped backoff. Every
        other outage is ridden out."""
        return self._since is not None and self._unresolved is not None and self._capped

    @property
    def seconds(self) -> float:
        """How long the current outage has lasted (0 when there is none)."""
        return 0.0 if self._since is None else self._monotonic() - self._since

    def fold(self) -> None:
        """A message of the store's client library about the outage, not printed."""
        with self._lock:
            self._folded += 1

    def begin_pass(self) -> None:
        """A new pass over the store starts (a poll and the drives it finds)."""
        with self._lock:
            self._hit = False

    def answered(self) -> None:
        """The store answered this pass's poll: an outage under way ends now (reported),
        not after the drives that follow, so a failure later in the pass (the server
        restarting again) is an outage of its own."""
        self.end_pass()

    def end_pass(self) -> None:
        """The pass finished: if it hit no outage, an outage under way ends (reported)."""
        with self._lock:
            self._end_pass()

    def _end_pass(self) -> None:
        if self._hit or self._since is None:
            return
        ended = OutageEnded(self._monotonic() - self._since, self._retries, self._interrupted, self._folded)
        self._since = None
        self._interrupted = self._folded = 0
        if self._on_change is not None:
            self._on_change(ended)

    @property
    def hit(self) -> bool:
        """Whether the current pass hit the outage (the worker stops the pass)."""
        return self._hit

    def delay(self) -> float:
        """Seconds to wait before the next try: doubled per failed retry, capped."""
        return min(self.max_delay, self.first_delay * (1 << min(self._retries, 30)))


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class RunBackoff:
    """Which Runs ``Worker.run()`` skips this poll: after its n-th failure in a row a Run
    sits out the next 2**(n-1) polls (at most ``MAX_SKIPPED_POLLS``); one good drive
    clears it."""

    def __init__(self) -> None:
        self.poll = 0
        self.failures: dict[str, int] = {}
        self.until: dict[str, int] = {}

    def next_poll(self) -> None:
        """A new poll: Runs whose last failure is long past are forgotten."""
        self.poll += 1
        # a Run whose last failure is long past (it ended, or another worker drove it)
        # is forgotten, so what this keeps is bounded by the Runs failing now
        for run_id in [r for r, until in self.until.items() if until + MAX_SKIPPED_POLLS < self.poll]:
            del self.until[run_id]
            del self.failures[run_id]

    def skipped(self) -> set[str]:
        """The Runs that sit out this poll."""
        return {run_id for run_id, until in self.until.items() if until >= self.poll}

    def record(self, run_id: str, *, failed: bool) -> None:
        """How a drive of ``run_id`` went."""
        if not failed:
            self.failures.pop(run_id, None)
            self.until.pop(run_id, None)
            return
        count = self.failures.get(run_id, 0) + 1
        self.failures[run_id] = count
        self.until[run_id] = self.poll + min(2 ** (count - 1), MAX_SKIPPED_POLLS)
