"""One error tree: every error runkernel raises on purpose is a ``RunkernelError``, defined
in ``runkernel.errors`` (the integrations' in the integration), under exactly one branch
that says whose fault it is (``UsageError``, ``PeerError``, ``StoreError``) or a
``KernelBug``; the root and the branches cannot be raised; the Python bases callers
caught before the tree existed, and the old import locations, still hold."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import runkernel
from runkernel import errors
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.actions import CallRequest
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.registry import open_store
from runkernel.errors import BRANCHES, KernelBug, PeerError, RunkernelError, StoreError, UsageError
from runkernel.specs.trace_lines import parse_line

#: Exceptions defined in runkernel that are deliberately not RunkernelErrors, and why.
NOT_IN_THE_TREE: dict[str, str] = {
    "runkernel.cli.text.CliError": "internal to the CLI: always one line on stderr and an exit code",
    "runkernel.kernel.validate_calls.Illegal": "the judge's internal short-circuit, returned as a Rejection",
    "runkernel.adapters.stores.postgres.send.ConnectionLost": "internal to the PostgreSQL store's retry loop",
    "runkernel.adapters.stores.postgres.send_async.ConnectionLost": "internal to the PostgreSQL store's retry loop",
    "runkernel.testing.crash.SimulatedCrash": "a simulated process death: must escape every handler of our errors",
    "runkernel.testing.simulation.failfast.EnvironmentFailure": "a simulation's verdict on its store: must escape them too",
    "runkernel.integrations.pydantic_ai._context.SystemPromptNotKept": "a UserWarning, warned and never raised",
    "runkernel.kernel.codec_typed._NotCertain": "the typed reading's internal short-circuit: the strict reader reads the line",
}

#: Where each public error sits: a change here is a change of whose fault it is.
BRANCH_OF: dict[str, type[RunkernelError]] = {
    "DriverError": UsageError,
    "UnknownTool": UsageError,
    "HostProtocolError": UsageError,
    "BadToolPolicy": UsageError,
    "BadStoreUrl": UsageError,
    "UnknownRun": UsageError,
    "AppLoadError": UsageError,
    "NoInvocation": UsageError,
    "RejectedError": PeerError,
    "IllegalCommit": PeerError,
    "RuntimeProtocolError": PeerError,
    "TraceFormatError": PeerError,
    "IllegalShape": PeerError,
    "NotATrace": PeerError,
    "NotIJson": PeerError,
    "CommitConflict": StoreError,
    "StoreUnavailable": StoreError,
    "SchemaError": StoreError,
    "DamagedStore": StoreError,
    "LeaseHeld": StoreError,
    "LeaseLost": StoreError,
    "DriverStopped": StoreError,
}

#: Python bases that callers caught before the tree existed.
KEPT_BASES: dict[str, type[BaseException]] = {
    "UnknownTool": ValueError,
    "BadToolPolicy": ValueError,
    "TraceFormatError": ValueError,
    "IllegalShape": ValueError,
    "NotIJson": ValueError,
    "RuntimeProtocolError": RuntimeError,
    "KernelBug": AssertionError,
}

#: The modules that defined an error before ``runkernel.errors`` held them all.
OLD_HOMES: dict[str, tuple[str, ...]] = {
    "runkernel.adapters.drive.actions": (
        "DriverError", "UnknownTool", "DriverStopped", "HostProtocolError",
    ),
    "runkernel.adapters.stores.contract": (
        "StoreError", "CommitConflict", "IllegalCommit", "StoreUnavailable", "SchemaError", "DamagedStore",
        "LeaseError", "LeaseHeld", "LeaseLost", "UnknownRun",
    ),
    "runkernel.adapters.stores.registry": ("BadStoreUrl",),
    "runkernel.adapters.drive.events": ("RuntimeProtocolError",),
    "runkernel.adapters.drive.runtime": ("RuntimeProtocolError",),
    "runkernel.adapters.drive.invocation": ("NoInvocation",),
    "runkernel.adapters.worker.apps": ("AppLoadError",),
    "runkernel.kernel": ("RejectedError", "KernelBug"),
    "runkernel.kernel.planning": ("KernelBug",),
    "runkernel.kernel.decide": ("KernelBug",),
    "runkernel.kernel.rules": ("RejectedError",),
    "runkernel.kernel.codec": ("TraceFormatError", "IllegalShape"),
    "runkernel.kernel.canonical": ("NotIJson",),
    "runkernel.specs.checker": ("NotATrace",),
}


def _modules() -> tuple[list[ModuleType], list[str]]:
    """Every module of runkernel, and those skipped because an optional extra is missing."""
    found: list[ModuleType] = []
    skipped: list[str] = []

    def missing_extra(name: str) -> None:
        skipped.append(name)

    for info in pkgutil.walk_packages(runkernel.__path__, "runkernel.", onerror=missing_extra):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError as error:
            if (error.name or "").startswith("runkernel"):
                raise  # our own import is broken: not a missing extra
            skipped.append(info.name)
    return found, skipped


def _defined_exceptions() -> tuple[dict[str, type[BaseException]], list[str]]:
    """The exceptions runkernel defines, by qualified name, and the modules skipped for a
    missing extra."""
    modules, skipped = _modules()
    defined: dict[str, type[BaseException]] = {}
    for module in modules:
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__.startswith("runkernel"):
                defined[f"{value.__module__}.{value.__qualname__}"] = value
    print(f"modules imported: {len(modules)}, skipped for a missing extra: {skipped}, exceptions: {len(defined)}")
    assert len(modules) > 60, "the walk found runkernel's modules"
    return defined, skipped


def test_every_exception_runkernel_defines_is_in_the_tree_under_one_branch() -> None:
    defined, skipped = _defined_exceptions()
    # an exception of a module whose extra is not installed cannot be looked at here
    documented = {name for name in NOT_IN_THE_TREE if not name.startswith(tuple(m + "." for m in skipped))}
    assert documented <= set(defined), "every documented exception still exists"
    in_tree = 0
    for name, cls in sorted(defined.items()):
        if name in NOT_IN_THE_TREE:
            assert not issubclass(cls, RunkernelError), f"{name} is listed as outside the tree"
            continue
        assert issubclass(cls, RunkernelError), f"{name} is not a RunkernelError"
        assert cls.__module__ == "runkernel.errors" or cls.__module__.startswith("runkernel.integrations."), (
            f"{name}: runkernel's errors live in runkernel.errors"
        )
        if cls is RunkernelError or cls in BRANCHES:
            continue
        branches = [branch for branch in BRANCHES if issubclass(cls, branch)]
        if issubclass(cls, KernelBug):
            assert branches == [], f"{name}: a KernelBug is on no branch"
        else:
            assert len(branches) == 1, f"{name} is under {branches}, not exactly one branch"
        in_tree += 1
    print(f"errors under a branch or KernelBug: {in_tree}")


def test_each_public_error_is_on_the_branch_of_whose_fault_it_is() -> None:
    for name, branch in BRANCH_OF.items():
        cls = getattr(errors, name)
        assert issubclass(cls, branch), f"{name} belongs under {branch.__name__}"
    exported = {
        name for name in runkernel.__all__ if inspect.isclass(getattr(runkernel, name))
        and issubclass(getattr(runkernel, name), BaseException)
    }
    abstract = {"RunkernelError", "UsageError", "PeerError", "StoreError", "LeaseError", "KernelBug"}
    assert exported - abstract <= set(BRANCH_OF), "every exported error has its branch pinned here"


@pytest.mark.parametrize("base", [RunkernelError, *BRANCHES, errors.LeaseError], ids=lambda c: c.__name__)
def test_the_root_and_the_branches_cannot_be_raised(base: type[RunkernelError]) -> None:
    with pytest.raises(TypeError, match="is a base class; raise one of its subclasses"):
        base("x")


def test_the_python_bases_callers_caught_are_kept() -> None:
    for name, base in KEPT_BASES.items():
        assert issubclass(getattr(errors, name), base), f"{name} is still a {base.__name__}"
    assert issubclass(errors.HostProtocolError, errors.DriverError)
    assert issubclass(errors.IllegalShape, errors.TraceFormatError)
    assert issubclass(errors.LeaseHeld, errors.LeaseError) and issubclass(errors.LeaseLost, errors.LeaseError)


def test_the_old_import_locations_export_the_same_classes() -> None:
    for module_name, names in OLD_HOMES.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert getattr(module, name) is getattr(errors, name), f"{module_name}.{name}"
    for name in errors.__all__:
        if name in runkernel.__all__:
            assert getattr(runkernel, name) is getattr(errors, name), name


def test_the_integrations_errors_are_on_their_branches() -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from runkernel.integrations import pydantic_ai

    assert issubclass(pydantic_ai.IntegrationError, UsageError)
    assert issubclass(pydantic_ai.DeferredAfterStart, pydantic_ai.IntegrationError)
    assert issubclass(pydantic_ai.RunEnded, PeerError) and issubclass(pydantic_ai.StillRunning, PeerError)


# --- raised for real, told apart by type ------------------------------------------------


def test_a_tool_without_a_policy_is_the_hosts_fault() -> None:
    driver = Driver(MemoryStore(), {})
    driver.start(["go"], thread_id="t1", run_id="r1")
    with pytest.raises(UsageError) as raised:
        driver.inferred("x", [CallRequest("nope", {})])
    assert type(raised.value) is errors.UnknownTool and isinstance(raised.value, ValueError)


def test_a_bad_store_url_is_the_hosts_fault_not_the_stores() -> None:
    with pytest.raises(UsageError) as raised:
        open_store("redis://x")
    assert type(raised.value) is errors.BadStoreUrl and not isinstance(raised.value, StoreError)


def test_picking_up_a_run_never_started_is_the_hosts_fault() -> None:
    with pytest.raises(errors.UnknownRun, match="no committed state for run 'missing'") as raised:
        Driver(MemoryStore(), {}).pick_up("missing")
    assert isinstance(raised.value, UsageError) and not isinstance(raised.value, StoreError)


def test_bytes_that_are_no_trace_are_the_senders_fault() -> None:
    with pytest.raises(PeerError) as raised:
        parse_line(b'{"a": 1, "a": 2}')
    assert type(raised.value) is errors.NotATrace and "duplicate key" in str(raised.value)
