"""``runkernel crashtest --app MODULE:ATTR``: crash-test the user's own app at every
commit boundary of its crash-free Run (see ``runkernel.testing.crashtest``).

The app is loaded as ``runkernel worker`` loads it. Its module may declare
``crashtest_scenarios`` (a sequence of ``Scenario``), used when no ``--scenario`` is
given, and ``crashtest_reset()``, which empties its downstream test double before each
play (an app object's own ``reset()`` is used first). Exit 0 when every check passes, 1
when one fails, 2 for bad usage or an app that is not deterministic.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.apps import AppLoadError, load_app
from runkernel.cli.text import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, CliError, ProgressBar
from runkernel.errors import UsageError

if TYPE_CHECKING:
    from runkernel.testing.crashtest.scenario import Scenario

#: Every Thread a crash test writes starts so; a store holding any other is refused.
THREAD_PREFIX = "crashtest-"


class Progress(ProgressBar):
    """The crash plays done so far, on stderr."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream, "crashtest")

    def __call__(self, done: int, total: int, what: str) -> None:
        self.show(done, total, f"{done}/{total} crashes")


def _crashtest(args: argparse.Namespace) -> int:
    from runkernel.testing.crashtest import format_json, format_text
    from runkernel.testing.crashtest.runner import crashtest

    try:
        app = load_app(args.app)
    except AppLoadError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    module = sys.modules.get(args.app.partition(":")[0])
    scenarios = _scenarios(args.scenario, module)
    reset = getattr(app, "reset", None) or getattr(module, "crashtest_reset", None)
    if reset is not None and not callable(reset):
        raise CliError(f"{args.app}: reset is not callable", EXIT_USAGE)
    fresh, opened = _stores(args.store)
    try:
        report = crashtest(
            app,
            scenarios,
            reset=reset,
            at_most_once=args.at_most_once,
            strict=args.strict,
            seed=args.seed,
            store=fresh,
            progress=Progress(sys.stderr),
        )
    except UsageError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    finally:
        if opened is not None:
            opened.close()
    sys.stdout.write(format_json(report) if args.format == "json" else format_text(report))
    return EXIT_OK if report.passed else EXIT_FAILURE


def _scenarios(given: Sequence[str], module: object) -> tuple[Scenario, ...]:
    from runkernel.testing.crashtest.scenario import BadScenario, Scenario, scenarios_from_json

    declared = tuple(getattr(module, "crashtest_scenarios", ()) or ())
    if not all(isinstance(s, Scenario) for s in declared):
        raise CliError("crashtest_scenarios must be a sequence of runkernel.testing.crashtest.Scenario", EXIT_USAGE)
    if not given:
        return declared
    chosen: list[Scenario] = []
    by_name = {s.name: s for s in declared}
    for name in given:
        if name.endswith(".json"):
            try:
                text = Path(name).read_text(encoding="utf-8")
                chosen += scenarios_from_json(text, name)
            except OSError as error:
                raise CliError(f"--scenario {name}: {error.strerror or error}", EXIT_USAGE) from None
            except BadScenario as error:
                raise CliError(str(error), EXIT_USAGE) from None
        elif name in by_name:
            chosen.append(by_name[name])
        else:
            known = ", ".join(sorted(by_name)) or "none declared (crashtest_scenarios)"
            raise CliError(f"--scenario {name}: no such scenario (the app's: {known}); or give FILE.json", EXIT_USAGE)
    return tuple(chosen)


def _stores(url: str | None) -> tuple[Callable[[], Store] | None, Store | None]:
    """A fresh store per play: a new memory store, or the one at ``url`` emptied (it
    must hold nothing but a crash test's own Threads: never the Run store)."""
    if url is None or url == "memory:":
        return None, None
    from runkernel.adapters.stores.registry import open_store

    store = open_store(url)
    foreign = [t for t in store.thread_ids() if not t.startswith(THREAD_PREFIX)]
    if foreign:
        store.close()
        raise CliError(
            f"--store holds Runs that crashtest did not create (thread {foreign[0]!r}): "
            "give a scratch store, never the Run store",
            EXIT_USAGE,
        )

    def emptied() -> Store:
        store.reset()
        return store

    return emptied, store


def register_crashtest(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``crashtest`` to the parser."""
    parser = commands.add_parser(
        "crashtest",
        help="crash-test your own app at every commit boundary; report what the world saw",
        description=(
            "Play the app's scenario once without a crash (twice: an app that does not repeat "
            "itself is refused), then once per commit boundary of that Run and crash position, "
            "each recovered by a fresh host from the store alone; judge every Thread (I1-I15) "
            "and count each tool's extra executor starts per operation: an extra start of a tool not "
            "declared replay fails, and so does one of a tool named --at-most-once (or any, with "
            "--strict); the verdict names every replay tool that started again. Exit 0 when every check "
            "passes, 1 when one fails, 2 for bad usage or a non-deterministic app."
        ),
    )
    parser.add_argument("--app", required=True, metavar="MODULE:ATTR", help="the app, loaded as runkernel worker loads it")
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="SCENARIO",
        help="a scenario the app module declares (crashtest_scenarios, by name), or a scenario file (FILE.json); "
        "repeatable (default: the declared ones, or one that approves every wait)",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="a scratch store, emptied before each play (default: in memory); one holding other Runs is refused",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the fixed ids (default 0)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    parser.add_argument(
        "--at-most-once",
        action="append",
        default=[],
        metavar="TOOL",
        help="any extra start of TOOL fails the test, even if it is declared replay; repeatable "
        "(name every tool that must not run twice, a payment: a replay tool's extra start passes otherwise)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="every extra start fails, a replay tool's too (as --at-most-once for every tool)",
    )
    parser.set_defaults(handler=_crashtest)


__all__ = ["THREAD_PREFIX", "register_crashtest"]
