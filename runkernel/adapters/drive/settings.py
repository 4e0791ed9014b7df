"""What a driver was configured with (``Settings``): one value shared by every core
(``core``) the driver makes, by the push-mode shells and by the pull-mode runtime."""

from __future__ import annotations

from attrs import frozen

from runkernel.adapters.drive.model_errors import DEFAULT_MODEL_ATTEMPTS, TransientPredicate, transient_model_error
from runkernel.adapters.drive.ports import Clock, IdSource
from runkernel.adapters.drive.telemetry import NO_TELEMETRY, Telemetry
from runkernel.kernel.policies import Policies


@frozen
class Settings:
    """What a driver was configured with; shared by every core it makes."""

    policies: Policies
    ids: IdSource
    clock: Clock
    #: the application recorded on the activation of each Run this driver starts, and of
    #: each child Run it activates for a concurrent delegation (a worker of that app
    #: drives the child)
    app: str | None = None
    #: the version of that application's code, recorded beside it (``app_version``)
    app_version: str | None = None
    #: make ``decide`` and ``recover`` judge each commit they build before the store
    #: judges it again (tests and the simulator; off in production)
    self_check: bool = False
    #: refuse a model reply that calls a tool without a declared policy (``UnknownTool``);
    #: off, such a call is committed and its host fails it
    refuse_unknown_tools: bool = True
    #: which exceptions of a model call are worth another attempt (``model_errors``)
    transient: TransientPredicate = transient_model_error
    #: attempts of one model call in this driver's hands before the Run ends ``failed``
    model_attempts: int = DEFAULT_MODEL_ATTEMPTS
    #: the tools whose downstream takes a fence (W5): before a commit makes terminal a
    #: call of one of them that this core found Executing and did not start, it hands
    #: out ``Fence`` and commits only once the host answers ``fenced``
    fences: frozenset[str] = frozenset()
    #: told what each drive does (``telemetry``); the default records nothing
    telemetry: Telemetry = NO_TELEMETRY


__all__ = ["Settings"]
