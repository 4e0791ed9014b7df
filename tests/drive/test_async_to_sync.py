"""The sync push-mode shell is generated from the async one (``tools/async_to_sync.py``),
and so are the PostgreSQL store's sync session, pick-up and inbox writes: each checked-in
sync module (``driver_sync.py``, ``postgres/connection.py``, ...) is what the tool makes
of its async source, and the tool's rewrite does what its docstring says."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent.parent / "tools"
if str(TOOLS) not in sys.path:
    sys.path.append(str(TOOLS))  # a dev tool, run as a script: not in the package

import async_to_sync  # noqa: E402
from runkernel.adapters.drive.driver import AsyncDriver, Driver  # noqa: E402


def test_the_checked_in_sync_modules_are_generated_from_the_async_ones() -> None:
    for source, target in async_to_sync.GENERATED:
        generated = async_to_sync.generate((async_to_sync.ROOT / source).read_text(), source)
        checked_in = (async_to_sync.ROOT / target).read_text()
        assert checked_in == generated, f"{target} is stale (or edited by hand): python tools/async_to_sync.py"
    assert async_to_sync.stale() == []


def test_the_two_shells_have_the_same_methods_one_awaitable_one_not() -> None:
    def methods(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(cls).items()
            if inspect.isfunction(member)
        }

    sync, asynchronous = methods(Driver), methods(AsyncDriver)
    assert sync.keys() == asynchronous.keys()
    assert "inferred" in sync and "ask_status" in sync
    for name in sync:
        assert not inspect.iscoroutinefunction(getattr(Driver, name)), name
        assert inspect.iscoroutinefunction(getattr(AsyncDriver, name)), name
        assert list(sync[name].parameters) == list(asynchronous[name].parameters), name
    print(f"shells: {len(sync)} methods each, the sync ones generated")


SAMPLE = '''"""A sample for asyncio hosts, ``AsyncThing``, beside ``m.thing_async``."""

from collections.abc import Awaitable, Callable
from m.thing_async import AsyncThing, MaybeAwaitable, other
from m.thing_async import helper

if True:  # ASYNC
    import asyncio
else:
    import time


class AsyncWidget(AsyncThing):
    """The ``AsyncWidget`` for asyncio hosts."""

    async def run(self, ask: MaybeAwaitable[int], work: Callable[[], Awaitable[int]]) -> int:
        # a comment naming AsyncWidget stays as written
        async with self.lock:
            async for item in self.items():
                await self.use(item)
        seen = [x async for x in self.items() if await x]
        if True:  # ASYNC
            await asyncio.sleep(1)
            if True:  # ASYNC
                print("nested, dropped with its block")
        else:
            time.sleep(1)
        if True:  # ASYNC
            print("async only")
        return await self.answer("an error naming AsyncWidget stays as written")


__all__ = ["AsyncWidget", "other"]
'''

EXPECTED = '''"""A sample for synchronous hosts, ``Thing``, beside ``m.thing_async``."""

from collections.abc import Callable
from m.thing import Thing, other
from m.thing import helper

import time


class Widget(Thing):
    """The ``Widget`` for synchronous hosts."""

    def run(self, ask: int, work: Callable[[], int]) -> int:
        # a comment naming AsyncWidget stays as written
        with self.lock:
            for item in self.items():
                self.use(item)
        seen = [x for x in self.items() if x]
        time.sleep(1)
        return self.answer("an error naming AsyncWidget stays as written")


__all__ = ["Widget", "other"]
'''


def test_the_rewrite_drops_async_resolves_async_blocks_and_renames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_to_sync, "RENAMES", {"AsyncWidget": "Widget", "AsyncThing": "Thing"})
    monkeypatch.setattr(async_to_sync, "MODULE_RENAMES", {"thing_async": "thing"})
    generated = async_to_sync.generate(SAMPLE, "sample_async.py")
    assert generated == async_to_sync.header("sample_async.py") + EXPECTED


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ("if x:  # ASYNC\n    pass\n", "marks only 'if True:'"),
        ("if True:  # ASYNC\n    a = 1\nelif y:\n    a = 2\n", "must be 'else:'"),
        ("def f():\n    if True:  # ASYNC\n        pass\n", "does not parse"),
    ],
)
def test_the_rewrite_refuses_what_it_cannot_make_sync(source: str, complaint: str) -> None:
    with pytest.raises(async_to_sync.GenerationError, match=complaint):
        async_to_sync.generate(source, "sample_async.py")
