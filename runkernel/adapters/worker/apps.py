"""What ``runkernel worker --app MODULE:ATTR`` loads: a host application, in one of
two kinds, and how it is found (like ``uvicorn module:app``).

- ``RuntimeApp``: ports for the pull-mode runtime (model, tools with their policies,
  gate, observer); the worker's runtime calls them.
- ``PushApp``: a host that calls its model and tools itself; the worker hands it a
  push-mode ``Driver`` already holding the Run (and its lease) and the first action,
  and the host answers actions until the driver says ``WaitFor``, ``ChildrenRunning``
  or ``Done``.
- ``AsyncPushApp``: the same for an asyncio host (an agent framework): the worker runs
  its ``drive`` with an ``AsyncDriver`` that holds the Run's lease, every drive in the
  worker's one long-lived event loop (closed at shutdown), and
  the host picks the Run up itself, because the gate a pick-up may ask is often known
  only inside the host's own run (which tools wait is the framework's declaration).

A push app may also have ``gate``, ``max_steps``, ``on_indeterminate``, ``transient``,
``model_attempts`` and ``fences``: the worker builds its driver with them (as
``Driver(...)`` takes them; defaults otherwise).

Either has a ``name``: the ``app`` its Runs record at activation. A worker drives only
Runs whose app is its app's name. Either may declare a ``version`` (a string): the
``app_version`` its Runs record beside the name; without one, the version is a digest
of its tool table, names and policies (``version_of``). An app whose tools are listed
while it runs (an MCP server's: a push app that says so with ``dynamic_tools = True``)
has no such table and must declare its version. A worker drives the Runs of its app
recorded with its version, with a version recorded compatible with it
(``Store.accept_versions``), or with none (activated before versions existed).

Whoever hosts an app's drives (the worker, ``runkernel crashtest``, ``runkernel
simulate``) builds them here, from the app and the host's own ``HostOptions``:
``app_runtime`` for a ``RuntimeApp``, ``app_driver`` and ``app_async_driver`` for a push
app.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from attrs import frozen

from runkernel.adapters.drive.actions import Action
from runkernel.adapters.drive.app_version import tool_table_version
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.events import RuntimeEvent
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.model_errors import DEFAULT_MODEL_ATTEMPTS, TransientPredicate, transient_model_error
from runkernel.adapters.drive.ports import Clock, GatePort, HookPort, IdSource, ModelPort, Observer, ToolRegistry, utc_now
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.drive.telemetry import Telemetry
from runkernel.adapters.stores.contract import Store
from runkernel.errors import AppLoadError as AppLoadError
from runkernel.errors import VersionRequired
from runkernel.kernel.policies import ToolPolicy


@frozen
class RuntimeApp:
    """A worker app for the pull-mode runtime: its name and its ports (``hooks`` answer
    StepStart/BeforeInference and AfterTool, as ``Runtime`` takes them), and which model
    errors are transient and how many attempts a model call gets (as ``Runtime`` takes
    them: see ``runkernel.adapters.drive.model_errors``)."""

    name: str
    model: ModelPort
    tools: ToolRegistry
    gate: GatePort | None = None
    observer: Observer | None = None
    hooks: HookPort | None = None
    transient: TransientPredicate = transient_model_error
    model_attempts: int = DEFAULT_MODEL_ATTEMPTS
    #: the version of this code its Runs record (``app_version``); None: the digest of
    #: its tool table (``version_of``)
    version: str | None = None


@runtime_checkable
class PushApp(Protocol):
    """A worker app that drives Runs itself through the push-mode driver. It may also
    have ``version`` (its code's version, a string; default: ``version_of``'s digest of
    ``tools``) and ``dynamic_tools`` (True when an MCP server lists tools while it runs:
    then ``version`` is required); neither is a member here, so apps without them match."""

    @property
    def name(self) -> str:
        """The app its Runs record at activation."""
        ...

    @property
    def tools(self) -> Mapping[str, ToolPolicy | str]:
        """Every tool the model may call, with its recovery policy (a ``ToolPolicy``, or
        ``"replay"``, ``"reconnect"`` or ``"indeterminate"``)."""
        ...

    def serve(self, driver: Driver, action: Action) -> None:
        """Carry out ``action`` and each next one the driver answers, until it is a
        ``WaitFor``, ``ChildrenRunning`` or ``Done`` (or the driver raises): the Run is
        then quiet."""
        ...


@runtime_checkable
class AsyncPushApp(Protocol):
    """A worker app that drives Runs itself through the asyncio push-mode driver; its
    optional ``version`` and ``dynamic_tools`` are ``PushApp``'s."""

    @property
    def name(self) -> str:
        """The app its Runs record at activation."""
        ...

    @property
    def tools(self) -> Mapping[str, ToolPolicy | str]:
        """Every tool the model may call, with its recovery policy (a ``ToolPolicy``, or
        ``"replay"``, ``"reconnect"`` or ``"indeterminate"``)."""
        ...

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        """Pick ``run_id`` up (``await driver.pick_up(run_id)``; the driver already holds
        its lease, and ``driver.gate`` may be set first) and carry out each action until
        it is a ``WaitFor`` or ``Done`` (or the driver raises): the Run is then quiet."""
        ...


WorkerApp = RuntimeApp | PushApp | AsyncPushApp


def version_of(app: WorkerApp) -> str:
    """The version of ``app``'s code its Runs record as ``app_version``, and the one its
    workers drive: its declared ``version`` if it has one (a non-empty string), else the
    digest of its tool table, names and policies (``tool_table_version``). An app whose
    tools are listed while it runs (``dynamic_tools``: MCP servers) must declare its
    version: ``VersionRequired`` otherwise."""
    declared = getattr(app, "version", None)
    if declared is not None:
        if not isinstance(declared, str) or not declared:
            raise VersionRequired(f"app {app.name!r} declares version {declared!r}: a version is a non-empty string")
        return declared
    if getattr(app, "dynamic_tools", False):
        raise VersionRequired(
            f"app {app.name!r} has tools an MCP server lists while it runs, so its tool table "
            "cannot name its code: declare its version (version='...'), and change it when the code changes"
        )
    tools: Mapping[str, ToolPolicy | str] = app.tools.policies.tools if isinstance(app, RuntimeApp) else app.tools
    return tool_table_version(tools)


#: What a push app may set on the driver built for it (as ``Driver`` takes them).
DRIVER_OPTIONS = ("gate", "max_steps", "on_indeterminate", "transient", "model_attempts", "fences")

DriverT = TypeVar("DriverT", bound=Driver)
AsyncDriverT = TypeVar("AsyncDriverT", bound=AsyncDriver)


@frozen
class HostOptions:
    """What the host of an app's drives sets, whatever the app (an app cannot override
    them): the ids and clock, who is told each event, a worker's leases, telemetry, and
    whether a concurrent group's tools run at once (``Runtime``'s ``calls_together``)."""

    ids: IdSource | None = None
    clock: Clock = utc_now
    on_event: Callable[[RuntimeEvent], None] | None = None
    leases: LeaseKeeper | None = None
    telemetry: Telemetry | None = None
    calls_together: bool = True


def app_runtime(
    app: RuntimeApp,
    store: Store,
    host: HostOptions,
    *,
    model: ModelPort | None = None,
    tools: ToolRegistry | None = None,
    self_check: bool = False,
) -> Runtime:
    """The pull-mode runtime that drives ``app``'s Runs on ``store``: the app's ports and
    model options, the host's options; ``model`` and ``tools`` stand in for the app's (a
    host that watches or scripts them)."""
    return Runtime(
        store,
        app.model if model is None else model,
        app.tools if tools is None else tools,
        gate=app.gate,
        observer=app.observer,
        hooks=app.hooks,
        transient=app.transient,
        model_attempts=app.model_attempts,
        app=app.name,
        app_version=version_of(app),
        ids=host.ids,
        clock=host.clock,
        on_event=host.on_event,
        leases=host.leases,
        telemetry=host.telemetry,
        self_check=self_check,
        calls_together=host.calls_together,
    )


def _driver_options(app: PushApp | AsyncPushApp, host: HostOptions) -> dict[str, Any]:
    options: dict[str, Any] = {k: getattr(app, k) for k in DRIVER_OPTIONS if hasattr(app, k)}
    options.update(
        ids=host.ids, clock=host.clock, on_event=host.on_event, leases=host.leases, telemetry=host.telemetry, app=app.name,
        app_version=version_of(app),
    )
    return options


def app_driver(app: PushApp, store: Store, host: HostOptions, kind: type[DriverT]) -> DriverT:
    """The push-mode driver (of class ``kind``: ``Driver`` or a subclass) a host hands
    ``app``: the driver options the app sets (``DRIVER_OPTIONS``), the host's options."""
    return kind(store, app.tools, **_driver_options(app, host))


def app_async_driver(app: AsyncPushApp, store: Store, host: HostOptions, kind: type[AsyncDriverT]) -> AsyncDriverT:
    """``app_driver`` for an asyncio app (``kind``: ``AsyncDriver`` or a subclass)."""
    return kind(store, app.tools, **_driver_options(app, host))


def load_app(spec: str) -> WorkerApp:
    """The app ``MODULE:ATTR`` names (ATTR may be dotted; a callable that is not an app
    is called with no arguments, as an app factory). The working directory is on the
    import path, as for ``uvicorn``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AppLoadError(f"--app {spec!r}: expected MODULE:ATTR, e.g. examples.demo_app:app")
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as error:
        raise AppLoadError(f"--app {spec!r}: cannot import {module_name!r}: {error}") from None
    except TypeError:  # a relative name ("../x", ".x"): importlib needs a package for it
        raise AppLoadError(f"--app {spec!r}: {module_name!r} is not a module name (a dotted name, no path)") from None
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise AppLoadError(f"--app {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(found, (RuntimeApp, PushApp, AsyncPushApp)) and callable(found) and _takes_no_arguments(found):
        found = found()
    if isinstance(found, (RuntimeApp, PushApp, AsyncPushApp)):
        return found
    raise AppLoadError(
        f"--app {spec!r} is a {type(found).__name__}, not a worker app: "
        "give a runkernel.RuntimeApp, an object with name, tools and serve(driver, action) "
        "(or async drive(driver, run_id)), or a factory of one that takes no arguments"
    )


def _takes_no_arguments(factory: object) -> bool:
    """Whether ``factory()`` can be called: an app factory takes no arguments, and a
    callable that needs some (``json:loads``) is not one."""
    try:
        inspect.signature(factory).bind()  # type: ignore[arg-type]
    except TypeError:
        return False
    except ValueError:  # no signature to read (some builtins): try it as a factory
        return True
    return True
