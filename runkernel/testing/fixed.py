"""Ids and time a test fixes: ``CountingIds`` (reproducible ids and tickets) and
``ManualClock`` (a clock that moves only when the test says so).

Production takes ``SecretIds`` (tickets from ``secrets``) and the wall clock; with
these two, the same script gives byte-identical commits and traces, and a deadline or
a lease expires exactly when the test moves the clock past it.
"""

from __future__ import annotations

import datetime
import itertools
import random

#: The instant a ``ManualClock`` starts at unless told otherwise (the simulator's "now").
START = "2026-06-01T00:00:00.000000Z"

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ISO = "%Y-%m-%dT%H:%M:%S.%fZ"


class CountingIds:
    """Reproducible ids for simulation and tests: counted ids for batches, calls and
    operations, and tickets of 192 bits from a pseudo-random source seeded by the
    prefix and ``seed``, so the same run gives byte-identical traces. Production uses
    ``SecretIds``, whose tickets come from ``secrets``."""

    def __init__(self, prefix: str, seed: int = 0) -> None:
        self.prefix = prefix
        self._next = itertools.count(1)
        self._tickets = random.Random(f"runkernel-sim/{seed}/{prefix}")
        self._forgeries = random.Random(f"runkernel-sim-forged/{seed}/{prefix}")

    def new_id(self, prefix: str) -> str:
        """``{prefix}-{this source's prefix}-{n}``, n counting from 1."""
        return f"{prefix}-{self.prefix}-{next(self._next)}"

    def ticket_id(self) -> str:
        """The next ticket of the seeded stream: ``tk_`` and 192 bits in hex."""
        return f"tk_{self._tickets.getrandbits(192):048x}"

    def forged_ticket_id(self) -> str:
        """A ticket id no ticket of this source has (for commands that must be refused),
        drawn from a stream of its own so it never shifts the real tickets."""
        return f"tk_{self._forgeries.getrandbits(192):048x}"


class ManualClock:
    """One clock, moved only by the test, in both forms runkernel takes. Called, it
    gives seconds (a store's ``clock``, a ``LeaseKeeper``'s ``monotonic``); ``iso``
    gives the same instant as fixed-width UTC ISO-8601 text (the ``clock`` of a
    ``Runtime``, ``Driver`` or ``Worker``, which deadlines and due times are compared
    with). ``now`` is the instant in seconds, free to set or add to."""

    def __init__(self, start: float | str = START) -> None:
        self.now = start if isinstance(start, float | int) else _seconds(start)

    def __call__(self) -> float:
        """The instant, in seconds."""
        return self.now

    def iso(self) -> str:
        """The instant as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC)."""
        moment = _EPOCH + datetime.timedelta(microseconds=round(self.now * 1_000_000))
        return moment.strftime(_ISO)

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` on."""
        self.now += seconds

    def set(self, when: float | str) -> None:
        """Move the clock to ``when`` (seconds, or ISO-8601 text ending in ``Z``)."""
        self.now = when if isinstance(when, float | int) else _seconds(when)


def _seconds(text: str) -> float:
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} names no time zone: give UTC, ending in Z")
    return (moment - _EPOCH).total_seconds()


__all__ = ["START", "CountingIds", "ManualClock"]
