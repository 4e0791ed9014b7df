"""``DurableAgentApp``: a durable agent as the app of ``runkernel worker``."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import attrs
from pydantic_ai import Agent

from runkernel import AsyncDriver, ToolPolicy
from runkernel.adapters.drive.model_errors import TransientPredicate
from runkernel.integrations._common import StillRunning
from runkernel.kernel import Ended, IndeterminateChoice

#: Makes the deps of the Run a worker drives, from its run id (sync or async).
DepsFactory = Callable[[str], Any | Awaitable[Any]]


class Resumer(Protocol):
    """What a ``DurableAgentApp`` needs of its ``RunkernelDurability``: its ``resume``."""

    async def resume(self, agent: Agent[Any, Any], run_id: str, *, driver: AsyncDriver | None = None, **run: Any) -> Any:
        """Continue Run ``run_id`` with ``driver`` until it is quiet."""
        ...


@attrs.frozen
class DurableAgentApp:
    """A durable agent as the app of ``runkernel worker`` (an ``AsyncPushApp``); made by
    ``RunkernelDurability.worker_app``. Each Run the worker hands it is resumed with the
    worker's driver until it waits or ends; a Run the agent ended (a failure, or an
    Indeterminate call under ``END_RUN``) is committed, so the worker goes on. ``deps``
    makes each Run's deps from its run id (None: the agent runs without deps); a Run
    started with deps of another type is refused (``DepsMismatch``, counted as a failed
    drive). ``tools``, ``max_steps``, ``on_indeterminate``, ``transient`` and
    ``model_attempts`` are the capability's, for the driver the worker builds."""

    name: str
    durability: Resumer = attrs.field(repr=False)
    agent: Agent[Any, Any] = attrs.field(repr=False)
    tools: Mapping[str, ToolPolicy | str] = attrs.field(repr=False)
    max_steps: int = attrs.field(repr=False)
    on_indeterminate: IndeterminateChoice = attrs.field(repr=False)
    transient: TransientPredicate = attrs.field(repr=False)
    model_attempts: int = attrs.field(repr=False)
    deps: DepsFactory | None = attrs.field(default=None, repr=False)
    #: the version its Runs record (``apps.version_of``; None: the digest of ``tools``)
    version: str | None = None
    #: whether the agent has MCP toolsets, whose tools are listed while it runs (then
    #: ``version`` must be declared)
    dynamic_tools: bool = False

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        """Resume ``run_id`` with ``driver`` (it holds the worker's lease) until it is quiet."""
        run: dict[str, Any] = {}
        if self.deps is not None:
            made = self.deps(run_id)
            run["deps"] = await made if inspect.isawaitable(made) else made
        try:
            await self.durability.resume(self.agent, run_id, driver=driver, **run)
        except StillRunning:
            return  # quiet for now: the worker asks again at a later poll
        except Exception:
            snapshot = driver.snapshot
            if snapshot is None or not isinstance(snapshot.state, Ended):
                raise  # a store failure, a lost lease, deps of another type: the worker counts it
