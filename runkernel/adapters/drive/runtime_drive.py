"""One pull-mode runtime's progress on one Run (``Drive``), one effect at a time: it
sends the core (``core``) what the runtime's ports (``runtime_ports``) answered, and
stops where a push-mode host would wait. ``Runtime`` (``runtime``) begins each Drive
with its ports.
"""

from __future__ import annotations

import time

from runkernel.adapters.drive.actions import (
    CheckStatus,
    ChildrenRunning,
    Done,
    Fence,
    HostProtocolError,
    Infer,
    RunCall,
    RunCalls,
    WaitFor,
)
from runkernel.adapters.drive.core import DriverCore
from runkernel.adapters.drive.protocol import (
    ActivateChild, Append, AskGate, CancelOwed, DropCheckpoint, Hand, InferenceFailed, Inferred, Observe, Operation,
    Partial, Pending, Poll, ReadChild, ReadCommands, ReadHead, ReadLookups, ReadMessages, ReadPickUp,
    ReadTrace, Report, Resume, SendCancel, Steps, Tell,
)
from runkernel.adapters.drive.ports import InferenceRequest
from runkernel.adapters.drive.runtime_group import CallsTogether
from runkernel.adapters.drive.runtime_ports import RuntimePorts
from runkernel.adapters.drive.events import RunOutcome, RuntimeProtocolError
from runkernel.errors import RunkernelError
from runkernel.kernel.protocol import ResumePayload
from runkernel.kernel.state import RunSnapshot, ThreadCommit
from runkernel.kernel.values import JsonValue

#: The core's operations that carry out an effect: a step ends after one of them.
_EFFECTS = (Append, ActivateChild, SendCancel, Observe, AskGate)
#: What a new drive does before its first step: it reads, queues the cancel a child's ended
#: parent owed it, and reports its recovery.
_READS = (ReadPickUp, CancelOwed, ReadHead, ReadMessages, ReadLookups, Pending, ReadCommands, ReadChild, Tell, ReadTrace)


class Drive:
    """One runtime's progress on one Run, one effect at a time.

    ``step()`` carries out one effect (a commit, a hook or notification, a port call, a
    child's activation or cancel) with whatever reads lead up to it, and says whether
    driving is over for now (see ``outcome``). A wait before a model call retried after
    a transient error is a step too: it sets ``pause`` to the seconds to wait before the
    next ``step()``, which first applies a command queued meanwhile, then calls the
    model.
    """

    def __init__(self, ports: RuntimePorts, run_id: str, core: DriverCore, steps: Steps) -> None:
        self.ports = ports
        self.run_id = run_id
        self._core = core
        self._steps = steps
        self.outcome: RunOutcome | None = None
        #: seconds to wait before the next step (a model call retried after a transient
        #: error), None when the next step may come at once
        self.pause: float | None = None
        self._waited: Infer | None = None  # the retried Infer whose wait was taken
        #: a resume to answer the first action with (``Runtime.resume``): the wait
        #: standing when the Run is picked up, or a typed refusal if none stands
        self.resume_with: ResumePayload | None = None
        #: the calls of a concurrent group this drive runs together
        self.together = CallsTogether(ports, together=ports.calls_together)
        # up to the first effect: what the drive will commit or ask first is decided now
        op = self._send(None)
        while isinstance(op, _READS):
            op = self._send(ports.perform(op))
        #: the core's next operation, yielded already
        self._next: Operation = op

    @property
    def state(self) -> RunSnapshot | None:
        """The Run's latest acknowledged snapshot (None before its activation)."""
        return self._core.state

    @property
    def next_commit(self) -> ThreadCommit | None:
        """The commit this drive writes next, decided already (None if it does something
        else first)."""
        return self._next.commit if isinstance(self._next, Append) else None

    def finish_in_flight(self) -> bool:
        """What a worker that stops asks before each step: from now on this drive starts
        nothing new (no tool, no model call); True while what it does next finishes
        something already in flight: a commit already decided (or a notification before
        it), or the answer of a tool it started (a concurrent group's call, running in
        its threads), which is then committed. False: stop here."""
        self.together.start_nothing()
        if isinstance(self._next, (Append, Observe, Tell)):
            return True
        return isinstance(self._next, Hand) and self.together.runs_any(self._next.action)

    def step(self) -> bool:
        """Advance by one effect. True once driving has stopped (see ``outcome``)."""
        if self.outcome is not None:
            return True
        try:
            return self._step()
        except BaseException:
            self.together.settle()  # the tools it started end before its failure is raised
            raise

    def _step(self) -> bool:
        op = self._next
        if self.pause is not None:
            self.pause = None
            op = self._send(Poll())  # a command queued during the wait goes first
        while True:
            if isinstance(op, Hand):
                if self._must_wait(op):
                    self._next = op
                    return False
                report = self._answer(op)
                if report is None:
                    return self._stop()
                self._next = self._send(report)
                return False
            following = self._send(self.ports.perform(op))
            if isinstance(op, _EFFECTS):
                while isinstance(following, DropCheckpoint):  # the commit's own cleanup
                    following = self._send(self.ports.perform(following))
                self._next = following
                return False
            op = following

    def run(self) -> RunOutcome:
        """Step until driving stops, sleeping each ``pause``."""
        while not self.step():
            if self.pause is not None:
                time.sleep(self.pause)
        assert self.outcome is not None
        return self.outcome

    def _must_wait(self, hand: Hand) -> bool:
        """Whether ``hand`` is a retried model call whose wait is still to be taken (and
        if so, take it: ``pause``)."""
        action = hand.action
        if hand.refused is not None or not isinstance(action, Infer) or action.retry_after <= 0:
            return False
        if action is self._waited:
            return False
        self._waited, self.pause = action, action.retry_after
        return True

    # --- the core ------------------------------------------------------------------

    def _send(self, value: object) -> Operation:
        try:
            return self._steps.send(value)
        except HostProtocolError as refused:
            if refused.rejection is None:
                raise
            raise RuntimeProtocolError(refused.rejection) from refused

    def _stop(self) -> bool:
        state = self._core.state
        assert state is not None
        self.outcome = RunOutcome(state.run_id, state)
        self._steps.close()
        return True

    # --- answering the core's actions with the ports ---------------------------------

    def _answer(self, hand: Hand) -> Report | None:
        """The report a port gives for the action handed out; None stops driving."""
        if hand.refused is not None:
            if isinstance(hand.refused, HostProtocolError) and hand.refused.rejection is not None:
                raise RuntimeProtocolError(hand.refused.rejection) from hand.refused
            raise hand.refused
        action = hand.action
        if isinstance(action, Fence):
            return self.ports.fence(action)  # before the commit, whatever answers next
        if self.resume_with is not None:
            # only the wait standing now may take it: any other action refuses it, and
            # the resume never lands on a wait that comes later
            payload, self.resume_with = self.resume_with, None
            return Resume(payload)
        match action:
            case Infer():
                return self._infer(action)
            case RunCall():
                return self.ports.run_call(action)
            case RunCalls():
                return self.together.answer(action)
            case CheckStatus():
                return self.ports.check_status(action)
            case WaitFor() | ChildrenRunning() | Done():
                return None  # a resume, a child's end or nothing wakes it: a later drive
        raise AssertionError(f"not an action: {action!r}")

    def _infer(self, action: Infer) -> Inferred | InferenceFailed:
        ports, state = self.ports, self._core.state
        assert state is not None
        staging = ports.hooks.before_inference(action.run_id, action.step, action.staged)
        stream = _Stream(self, action.run_id)
        request = InferenceRequest(
            state.thread_id, action.run_id, action.step, action.messages, action.partial, stream, staging.context
        )
        try:
            reply = ports.model.infer(request)
        except RunkernelError:
            raise  # the runtime's own refusal, not the model's (a simulated death is no Exception)
        except Exception as error:
            if stream.failed:
                raise  # the stream's checkpoint failed under the model: the drive's failure
            return InferenceFailed(error)  # the core decides: the same Infer again, or failed
        calls = tuple(reply.calls)
        return Inferred(reply.content, calls, None if calls else reply.end, None, staging.staged)

    def _checkpoint(self, partial: JsonValue) -> None:
        """The model's output so far, while it infers: the core saves it, best effort."""
        op = self._send(Partial(partial))
        while not isinstance(op, Hand):
            op = self._send(self.ports.perform(op))
        if op.refused is not None:
            raise op.refused


class _Stream:
    def __init__(self, drive: Drive, run_id: str) -> None:
        self.drive, self.run_id = drive, run_id
        #: a checkpoint raised (the store, the core): whatever the model raises then is
        #: not a model error
        self.failed = False

    def delta(self, data: JsonValue) -> None:
        self.drive.ports.observer.delta(self.run_id, data)

    def checkpoint(self, partial: JsonValue) -> None:
        try:
            self.drive._checkpoint(partial)
        except BaseException:
            self.failed = True
            raise


__all__ = ["Drive"]
