"""``docs/api.md``: the public API reference, generated from the docstrings.

``python -m runkernel.specs.api_doc > docs/api.md`` after changing a public name or its
docstring; a test fails while the page is stale. The page follows ``runkernel.SECTIONS``
(the table ``__all__`` is built from), so a name cannot be public and undocumented.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import sys
from typing import Any

import attrs

import runkernel

#: Type aliases carry no docstring of their own; their entry says what they are.
ALIAS_DOCS: dict[str, str] = {
    "Action": "`Infer | RunCall | CheckStatus | WaitFor | ChildrenRunning | Done`: what every method of a "
    "push-mode driver returns (see the table in `runkernel.adapters.driver_actions`).",
    "JsonValue": "Any JSON value: `None`, `bool`, `int`, `float`, `str`, a list of them or a "
    "`dict` with `str` keys. Arguments, results and message contents are JSON values.",
}

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _doc(value: Any) -> str:
    doc = value.__dict__.get("__doc__") if isinstance(value, type) else getattr(value, "__doc__", None)
    if not doc:
        raise ValueError(f"public name {getattr(value, '__name__', value)!r} has no docstring")
    return inspect.cleandoc(doc)


def _annotation(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return text.replace("runkernel.kernel.", "").replace("typing.", "")


def _default(value: Any) -> str:
    if value is attrs.NOTHING:
        return "(made fresh)"  # an attrs factory
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if inspect.isfunction(value) or inspect.isclass(value):
        return value.__name__
    if attrs.has(type(value)):
        try:
            plain = value == type(value)()
        except TypeError:
            plain = False
        return f"{type(value).__name__}()" if plain else f"{type(value).__name__}(...)"
    return _ADDRESS.sub("", repr(value))


def _signature(value: Any) -> str:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return "(...)"
    parts = []
    star_done = False
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if parameter.kind is parameter.VAR_POSITIONAL:
            star_done = True
            parts.append(f"*{parameter.name}")
            continue
        if parameter.kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
            continue
        text = parameter.name
        annotation = _annotation(parameter.annotation)
        if annotation:
            text += f": {annotation}"
        if parameter.default is not inspect.Parameter.empty:
            text += f" = {_default(parameter.default)}"
        parts.append(text)
    returned = _annotation(signature.return_annotation)
    arrow = f" -> {returned}" if returned and returned != "None" else ""
    return f"({', '.join(parts)}){arrow}"


def _members(cls: type) -> list[str]:
    """Public methods and properties defined by the class itself, with their summaries."""
    lines = []
    own = [base for base in cls.__mro__ if base.__module__.startswith("runkernel")]
    seen: set[str] = set()
    for name, member in [item for owner in own for item in vars(owner).items()]:
        if name in seen:
            continue
        seen.add(name)
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            if member.__doc__:
                lines.append(f"- `{name}` (property): {_first_line(member.__doc__)}")
        elif isinstance(member, classmethod) and (doc := member.__func__.__doc__):
            lines.append(f"- `{name}{_signature(member.__func__)}` (classmethod): {_first_line(doc)}")
        elif inspect.isfunction(member) and member.__doc__:
            prefix = "async " if inspect.iscoroutinefunction(member) else ""
            lines.append(f"- `{prefix}{name}{_signature(member)}`: {_first_line(member.__doc__)}")
    return lines


def _first_line(doc: str) -> str:
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _entry(name: str, value: Any) -> list[str]:
    if name in ALIAS_DOCS:
        return [f"### `{name}`", "", ALIAS_DOCS[name], ""]
    if isinstance(value, type) and issubclass(value, enum.Enum):
        listed = ", ".join(f"`{m.name}` = `{m.value!r}`" for m in value)
        return [f"### `{name}` (enum)", "", _doc(value), "", f"Members: {listed}.", ""]
    if isinstance(value, type) and issubclass(value, BaseException):
        bases = ", ".join(b.__name__ for b in value.__bases__)
        return [f"### `{name}` (exception: {bases})", "", _doc(value), ""]
    if isinstance(value, type):
        protocol = getattr(value, "_is_protocol", False)
        heading = f"### `{name}` (protocol)" if protocol else f"### `{name}{_signature(value)}`"
        lines = [heading, "", _doc(value), ""]
        members = _members(value)
        return lines + (members + [""] if members else [])
    if callable(value):
        return [f"### `{name}{_signature(value)}`", "", _doc(value), ""]
    return [f"### `{name} = {value!r}`", "", _constant_doc(name), ""]


def _constant_doc(name: str) -> str:
    """A constant's ``#:`` comment in the module that defines it."""
    module = sys.modules[runkernel.__dict__.get("_MODULE_OF", {}).get(name, "runkernel")]
    source = inspect.getsource(module).splitlines()
    for index, line in enumerate(source):
        if line.startswith(f"{name} ") or line.startswith(f"{name}:"):
            comments: list[str] = []
            back = index - 1
            while back >= 0 and source[back].startswith("#:"):
                comments.insert(0, source[back][2:].strip())
                back -= 1
            if comments:
                return " ".join(comments)
    raise ValueError(f"public constant {name!r} has no '#:' comment")


def render() -> str:
    """The whole reference page."""
    lines = [
        "# runkernel API reference",
        "",
        "Generated from the docstrings by `python -m runkernel.specs.api_doc > docs/api.md`;",
        "do not edit by hand. Every name is importable from `runkernel`.",
        "",
    ]
    for title, groups in runkernel.SECTIONS:
        lines += [f"## {title}", ""]
        for module_name, names in groups:
            module = importlib.import_module(module_name)
            for name in names:
                lines += _entry(name, getattr(module, name))
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
