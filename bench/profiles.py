"""Where runkernel's time goes on a side of a group: a cProfile of its work, in words.

A row that misses its goal names what limits it; this makes that a measurement of the
run that wrote RESULTS.md, not a sentence that ages. ``profile`` runs one unit of a
side's work (a group's ``Prepared.profiles``) under cProfile for about a second, after
the timed rounds, and says which parts of the code took the own time: by area
(runkernel's kernel, its stores and drivers, attrs' generated constructors, msgspec,
sqlite3, psycopg, ...) and by function.

cProfile charges a fixed cost to every Python call, so code made of many small calls
looks heavier than it is; the shares are for comparing parts of one side, never for a
rate (the table's rates are timed without it).
"""

from __future__ import annotations

import cProfile
import pstats
import re
import time
from collections.abc import Callable
from pathlib import Path

from attrs import frozen

SECONDS = 1.0
"""About how long one side is profiled."""

TOP = 6
"""Functions named, by own time."""

_ROOT = Path(__file__).resolve().parent.parent

# (file, line, function) as pstats keys them; "~" is the file of a built-in
_Key = tuple[str, int, str]
_BUILT_IN_METHOD = re.compile(r"<method '(\w+)' of '([\w.]+)' objects>")


@frozen
class Work:
    """One unit of a side's work to profile, and at most how many calls after the first
    (None: as many as fit in the time; a number for work made ahead that runs out)."""

    action: Callable[[], object]
    most: int | None = None
    #: what is profiled, when it is not the side's own timed work
    of: str | None = None


def profile_key(side: str) -> str:
    """The group note that holds ``side``'s profile."""
    return f"profile of {side}"


def profile(
    action: Callable[[], object], *, seconds: float = SECONDS, top: int = TOP, most: int | None = None
) -> str:
    """``action``'s own time, by area and by function, over about ``seconds`` (and at
    most ``most`` calls after the first, for an action that uses up prepared work)."""
    started = time.perf_counter()
    action()  # once unprofiled: warm caches, and learn how long one call takes
    once = max(time.perf_counter() - started, 1e-6)
    repeat = max(1, int(seconds / once))
    if most is not None:
        repeat = max(1, min(repeat, most))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        action()
    profiler.disable()
    stats: dict[_Key, tuple[int, int, float, float, object]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    own = {key: entry[2] for key, entry in stats.items() if not _is_profiler(key)}
    total = sum(own.values()) or 1e-12
    areas: dict[str, float] = {}
    for key, seconds_spent in own.items():
        areas[area(key)] = areas.get(area(key), 0.0) + seconds_spent
    ranked = sorted(areas.items(), key=lambda item: item[1], reverse=True)
    by_area = ", ".join(f"{name} {spent / total:.0%}" for name, spent in ranked if spent / total >= 0.01)
    functions = sorted(own.items(), key=lambda item: item[1], reverse=True)[:top]
    by_function = ", ".join(f"{label(key)} {spent / total:.0%}" for key, spent in functions)
    return f"{repeat:,} call{'' if repeat == 1 else 's'}; by area: {by_area}; top functions: {by_function}"


def _is_profiler(key: _Key) -> bool:
    return key[2] == "<method 'disable' of '_lsprof.Profiler' objects>"


def area(key: _Key) -> str:
    """The part of the code a function belongs to."""
    file, _, name = key
    if file == "~":
        for library in ("msgspec", "sqlite3", "psycopg", "orjson"):
            if library in name:
                return f"{library} (C)"
        return "Python built-ins (C)"
    if file.startswith("<attrs generated"):
        return "attrs-generated __init__/__eq__"
    path = file.replace("\\", "/")
    for part, name_of_area in (
        ("/runkernel/kernel/", "runkernel.kernel"),
        ("/runkernel/adapters/stores/", "runkernel stores"),
        ("/runkernel/adapters/", "runkernel drivers"),
        ("/runkernel/", "runkernel (other)"),
        ("/attr/", "attrs library"),
        ("/psycopg/", "psycopg (Python)"),
        ("/bench/", "bench harness"),
    ):
        if part in path:
            return name_of_area
    return "other Python (standard library)"


def label(key: _Key) -> str:
    """A function as ``name`` (``file:line``), the file relative to the project."""
    file, line, name = key
    if file == "~":
        method = _BUILT_IN_METHOD.fullmatch(name)
        return f"`{method[2]}.{method[1]}`" if method else f"`{name.strip('<>')}`"
    if file.startswith("<"):
        return f"`{name}` ({file.strip('<>').split(' ')[-1]})"
    path = Path(file)
    try:
        shown = path.resolve().relative_to(_ROOT).as_posix()
    except ValueError:
        shown = "/".join(path.parts[-2:])
    return f"`{name}` ({shown}:{line})"
