"""How a pull-mode ``Drive`` runs the calls of a concurrent group (``RunCalls``):
together, each tool body in a thread of its own, reported in call order; or, for a
runtime built with ``calls_together=False`` (the crash tester, simulate), one after
another on the drive's thread, in call order, so every run of one program passes the
same boundaries in the same order.

Everything but the tool bodies stays on the drive's own thread, one at a time: the
lease re-check before each start (W1), the AfterTool hook, the reports to the core and
so every commit. Reporting in call order keeps a drive's commits the same from one run
to the next whatever the tools' timing (the crash tester counts on it): a call that
ends early waits for the calls before it to be reported, never for them to run. A
retried member's new attempt starts as soon as its failure is reported.

Nothing is shared between drives: each group's calls get threads of their own, so the
slots of a worker and the calls of a group never wait for one another. A drive that
stops while its tools run (a lost lease, a store that failed, a simulated crash) first
waits for them to end, and drops their results, as a tool's result is lost when its
process dies: no tool of a stopped drive runs beside the drive that takes its Run over
in the same process, and its slot holds no thread once it is free.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from runkernel.adapters.drive.actions import RunCall, RunCalls
from runkernel.adapters.drive.ports import ToolReply
from runkernel.adapters.drive.protocol import CallEnded
from runkernel.adapters.drive.runtime_ports import RuntimePorts, StartedCall, run_started


class CallsTogether:
    """One drive's calls of ``RunCalls`` that run now, by ``(call_id, attempt)``."""

    def __init__(self, ports: RuntimePorts, *, together: bool) -> None:
        self.ports, self.together = ports, together
        self._running: dict[tuple[str, int], tuple[StartedCall, Future[ToolReply | Exception]]] = {}
        self._previous: RunCalls | None = None
        self._winding_down = False

    def start_nothing(self) -> None:
        """From now on, start no call: only the answers of the calls that run remain."""
        self._winding_down = True

    def runs_any(self, action: object) -> bool:
        """Whether ``action`` is a ``RunCalls`` listing a call this drive runs now."""
        return isinstance(action, RunCalls) and any((c.call_id, c.attempt) in self._running for c in action.calls)

    def answer(self, action: RunCalls) -> CallEnded:
        """Start every call of ``action`` not started yet, then the report of the first
        call in call order, once its tool returned (only that call's report, run on
        the drive's thread, when the calls do not run together). After
        ``start_nothing``: the report of the first call in call order that runs."""
        if self._winding_down:
            return self._report(next(c for c in action.calls if (c.call_id, c.attempt) in self._running))
        if not self.together:
            return self.ports.run_call(action.calls[0])
        for call in action.to_start(self._previous):
            started = self.ports.begin_call(call)  # W1 on the drive's thread, in call order
            self._running[(call.call_id, call.attempt)] = (started, _in_thread(started))
        self._previous = action
        return self._report(action.calls[0])

    def _report(self, call: RunCall) -> CallEnded:
        """``call``'s report once its tool returned (its thread is then done with)."""
        started, ran = self._running.pop((call.call_id, call.attempt))
        return self.ports.call_ended(started, ran.result())

    def settle(self) -> None:
        """Wait for every tool body still running to end; their results are dropped."""
        running, self._running = self._running, {}
        for _, ran in running.values():
            try:
                ran.result()
            except BaseException:  # noqa: BLE001 - the drive's own failure is what is raised
                pass


def _in_thread(started: StartedCall) -> Future[ToolReply | Exception]:
    """``run_started(started)`` in a daemon thread of its own; what it raises (a
    runtime refusal, a simulated death) is raised again by ``result()``."""
    future: Future[ToolReply | Exception] = Future()

    def run() -> None:
        try:
            future.set_result(run_started(started))
        except BaseException as error:  # noqa: BLE001 - handed to the drive's thread
            future.set_exception(error)

    name = f"runkernel-tool-{started.action.call_id}"
    threading.Thread(target=run, name=name, daemon=True).start()
    return future


__all__ = ["CallsTogether"]
