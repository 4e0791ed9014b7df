"""Every name a user had keeps working for one release: it resolves to the same object
(or a shim that ``isinstance`` treats as the new class), and each use warns once with a
``DeprecationWarning`` that names the new import path."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import runkernel
from runkernel import InferenceRequest, RunCall
from runkernel._compat import MOVED
from runkernel._deprecation import REMOVED_IN
from runkernel.adapters.drive import ports
from runkernel.adapters.drive.invocation import current_invocation, invocation_scope
from runkernel.errors import NoInvocation
from runkernel.kernel import Delegation
from runkernel.cli import api_doc

ROOT = Path(__file__).resolve().parent.parent

#: The old names of the host's vocabulary and the one name each concept has now.
RENAMED = {
    ("runkernel", "ToolInvocation"): ("runkernel", "RunCall"),
    ("runkernel", "ModelCall"): ("runkernel", "CallRequest"),
    ("runkernel", "Schedule"): ("runkernel.adapters.drive.ports", "Scheduled"),
    ("runkernel", "Delegate"): ("runkernel.adapters.drive.ports", "Delegated"),
    ("runkernel.adapters.drive.ports", "ToolInvocation"): ("runkernel", "RunCall"),
    ("runkernel.adapters.drive.ports", "ModelCall"): ("runkernel", "CallRequest"),
    ("runkernel.adapters.drive.ports", "Schedule"): ("runkernel.adapters.drive.ports", "Scheduled"),
    ("runkernel.adapters.drive.ports", "Delegate"): ("runkernel.adapters.drive.ports", "Delegated"),
}
#: Shims rather than the new class itself: their old constructors took other arguments.
SHIMS = {("runkernel", "ToolInvocation"), ("runkernel.adapters.drive.ports", "ToolInvocation")}


def use(module: str, name: str) -> tuple[Any, list[warnings.WarningMessage]]:
    """``module.name`` once, with every warning it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(module), name)
    return value, caught


def new_object(moved_module: str, moved_name: str) -> Any:
    return getattr(importlib.import_module(moved_module), moved_name)


def test_every_old_name_warns_once_with_its_new_path_and_is_the_same_object() -> None:
    for old, moved in MOVED.items():
        value, caught = use("runkernel", old)
        assert [w.category for w in caught] == [DeprecationWarning], old
        text = str(caught[0].message)
        assert f"runkernel.{old} is deprecated" in text and f"`from {moved.module} import {moved.name}`" in text
        assert f"goes in runkernel {REMOVED_IN}" in text
        assert caught[0].filename == __file__, "the warning points at the user's line"
        if ("runkernel", old) in SHIMS:
            assert value is not new_object(moved.module, moved.name) and isinstance(value, type)
        else:
            assert value is new_object(moved.module, moved.name), old
    print(f"old names of runkernel: {len(MOVED)}, each resolved with one warning")


def test_the_renamed_names_of_the_ports_module_warn_and_resolve() -> None:
    for (module, old), (new_module, new) in RENAMED.items():
        value, caught = use(module, old)
        assert len(caught) == 1 and f"(renamed {new})" in str(caught[0].message), (module, old)
        assert f"`from {new_module} import {new}`" in str(caught[0].message)
        if (module, old) not in SHIMS:
            assert value is new_object(new_module, new)


def test_each_use_warns_again() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = runkernel.decide  # an old name, on purpose
        second = runkernel.decide
    assert first is second and len(caught) == 2
    assert "decide" not in vars(runkernel), "an old name is never cached, so that each use warns"


def test_one_import_statement_warns_once() -> None:
    """``from runkernel import NAME`` asks the package twice (the import system's probe,
    then the statement itself): one warning, pointing at the import."""
    for statement in ("from runkernel import decide", "from runkernel import MemoryStore, decide"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(statement, "user_code.py", "exec"), {})
        assert len(caught) == statement.count(",") + 1, [str(w.message) for w in caught]
        assert {w.filename for w in caught} == {"user_code.py"}


def test_the_public_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in runkernel.__all__:
            getattr(runkernel, name)
        for name in ("Scheduled", "Delegated", "Lost", "Staging", "ToolReply", "GateAnswer"):
            getattr(ports, name)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    for module in (runkernel, ports):
        with pytest.raises(AttributeError, match="has no attribute 'Nonexistent'"):
            getattr(module, "Nonexistent")


def test_the_old_tool_invocation_builds_the_same_run_call() -> None:
    delegation = Delegation("t-child", "r-child", concurrent=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from runkernel import ToolInvocation  # type checkers see RunCall under the old name

        old_signature: Any = ToolInvocation  # ... which the old constructor's arguments do not fit
    built = old_signature("r1", "c1", "op1", 2, {"n": 1}, "answer", 7, delegation)
    assert built == RunCall("r1", "c1", "", {"n": 1}, "op1", 2, "answer", 7, delegation)
    keywords = old_signature(run_id="r1", call_id="c1", operation_id="op1", attempt=1, arguments=None, tool="t")
    assert keywords == RunCall("r1", "c1", "t", None, "op1", 1)
    handed_out = RunCall("r1", "c1", "search", {}, "op1", 1, lease_epoch=3)
    assert isinstance(handed_out, ToolInvocation) and isinstance(built, RunCall)
    assert issubclass(RunCall, ToolInvocation) and not isinstance(object(), ToolInvocation)
    match handed_out:
        case ToolInvocation():
            matched = True
        case _:
            matched = False
    assert matched, "a match on the old class still matches what a tool is given"


def test_the_integrations_invocation_is_the_run_call() -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from runkernel.integrations import pydantic_ai

    value, caught = use("runkernel.integrations.pydantic_ai", "Invocation")
    assert len(caught) == 1 and "`from runkernel import RunCall`" in str(caught[0].message)
    built = value("r1", "c1", "search", "op1", 2, 5)
    assert built == RunCall("r1", "c1", "search", None, "op1", 2, lease_epoch=5)
    assert isinstance(built, value)
    assert pydantic_ai.current_invocation is current_invocation, "one accessor in every mode"
    assert pydantic_ai.invocation_scope is invocation_scope


def test_the_invocation_scope_serves_with_and_async_with() -> None:
    import asyncio

    call = RunCall("r1", "c1", "search", {}, "op1", 1)
    with invocation_scope(call):
        assert current_invocation() is call

    async def body() -> RunCall:
        async with invocation_scope(call):
            return current_invocation()

    assert asyncio.run(body()) is call
    with pytest.raises(NoInvocation):
        current_invocation()
    with pytest.raises(LookupError):  # what the integration's own accessor raised before
        current_invocation()


def test_the_inference_requests_checkpoint_is_its_partial() -> None:
    request = InferenceRequest("t1", "r1", 1, (), {"saved": 1}, ports_stream())
    with pytest.warns(DeprecationWarning, match=r"InferenceRequest.checkpoint is deprecated \(renamed partial\)"):
        assert request.checkpoint == {"saved": 1}  # an old name, on purpose
    assert request.partial == {"saved": 1}


def ports_stream() -> ports.StreamSink:
    class Sink:
        def delta(self, data: object) -> None:
            pass

        def checkpoint(self, partial: object) -> None:
            pass

    return Sink()


def test_type_checkers_see_the_same_old_names() -> None:
    """``runkernel._compat``'s ``if TYPE_CHECKING`` imports are ``MOVED``, object for object."""
    tree = ast.parse((ROOT / "runkernel" / "_compat.py").read_text())
    seen: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module is not None
                for alias in statement.names:
                    assert alias.asname is not None
                    seen[alias.asname] = getattr(importlib.import_module(statement.module), alias.name)
    assert set(seen) == set(MOVED)
    for old, moved in MOVED.items():
        assert seen[old] is new_object(moved.module, moved.name), old


def test_every_old_name_is_documented_where_it_lives_now_and_in_the_changelog() -> None:
    documented = api_doc.documented()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for old, moved in MOVED.items():
        assert moved.name in documented.get(moved.module, set()), f"{old}: {moved.module}.{moved.name}"
        assert f"`{old}`" in changelog, f"CHANGELOG.md does not list {old}"
    for (_module, old), (new_module, new) in RENAMED.items():
        assert new in documented[new_module] and f"`{old}`" in changelog


def test_the_library_itself_uses_no_old_name() -> None:
    """Every module imports, and a simulation of every scenario runs, with runkernel's own
    deprecation warnings turned into errors (a user never sees one they did not cause)."""
    probe = (
        "import importlib, pathlib, sys, warnings\n"
        "warnings.filterwarnings('error', category=DeprecationWarning, module='runkernel')\n"
        "import runkernel\n"
        "root = pathlib.Path(runkernel.__file__).parent\n"
        "names = ['.'.join(('runkernel', *p.relative_to(root).with_suffix('').parts)).removesuffix('.__init__')\n"
        "         for p in sorted(root.rglob('*.py')) if 'integrations' not in p.parts]\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as error:  # a missing extra's module (the ui's Starlette)\n"
        "        if (error.name or '').startswith('runkernel'):\n"
        "            raise\n"
        "        print('skipped for a missing extra:', name)\n"
        "from runkernel.cli.entry import main\n"
        "sys.exit(main(['simulate', '--store', 'memory:', '--runs', '40']))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT)
    print(done.stdout[-400:])
    assert done.returncode == 0, done.stderr[-2000:]
