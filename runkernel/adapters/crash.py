"""Deprecated: crash injection moved to ``runkernel.testing`` (``Boundary``,
``SimulatedCrash``, the crash plans, ``CrashingStore``), and ``Position`` / ``position_of``
to ``runkernel.adapters.drive.events``; ``Runtime`` takes no ``crash=`` any more (wrap
its store and tools instead). This alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.events import Position as Position, position_of as position_of
from runkernel.testing.crash import (
    Boundary as Boundary,
    CrashPlan as CrashPlan,
    NeverCrash as NeverCrash,
    SimulatedCrash as SimulatedCrash,
)

moved_module(__name__, "runkernel.testing")


class CrashAtEncounter:
    """Crash at the ``target``-th boundary encountered (0-based), counting every kind
    (deprecated: ``runkernel.testing.CrashAtEncounters``)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.seen = 0
        self.fired: tuple[Boundary, Position] | None = None

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        hit = self.fired is None and self.seen == self.target
        self.seen += 1
        if hit:
            self.fired = (boundary, position)
        return hit
