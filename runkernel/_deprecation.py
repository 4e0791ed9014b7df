"""Names kept working for one release after they moved or were renamed.

A module that lost names defines ``__getattr__ = moved_names(__name__, {...})``: each old
name still resolves, to the same object (or, for a class whose constructor changed, to a
shim that ``isinstance`` and ``issubclass`` treat as the new class), and each use of it
warns once with a ``DeprecationWarning`` that names the new import path. Nothing is
cached in the module, so every use warns, and the warning points at the user's line.
The old names go in runkernel 0.3 (CHANGELOG.md lists them, with the way to migrate).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

#: The release that removes the names this module keeps working.
REMOVED_IN = "0.3"


@frozen
class Moved:
    """Where an old name lives now: ``module.name``. ``shim``, if given, is the
    ``(module, attribute)`` of what to hand out instead (a class whose constructor
    changed: see ``RenamedClass``)."""

    module: str
    name: str
    shim: tuple[str, str] | None = None

    @property
    def path(self) -> str:
        """How the warning tells the user to import it."""
        return f"from {self.module} import {self.name}"


def message(old: str, moved: Moved) -> str:
    """The warning for a use of ``old``: what to import instead, and when it goes."""
    renamed = "" if old.rsplit(".", 1)[-1] == moved.name else f" (renamed {moved.name})"
    return f"{old} is deprecated{renamed}: use `{moved.path}`; the old name goes in runkernel {REMOVED_IN}"


def renamed_attribute(old: str, new: str) -> str:
    """The warning for a use of the renamed attribute ``old`` (``Class.attribute``)."""
    return f"{old} is deprecated (renamed {new}): read `{new}`; the old name goes in runkernel {REMOVED_IN}"


def resolve(owner: str, name: str, table: Mapping[str, Moved], *, depth: int = 1) -> Any:
    """The object the old name ``owner.name`` stands for, with a ``DeprecationWarning``
    that points at the user's line; ``AttributeError`` if ``name`` is not in ``table``.

    ``depth`` counts the frames between this call and the user's code (1: a module's
    ``__getattr__`` calls this). A package's ``from P import NAME`` asks twice: the
    import system's own ``hasattr`` probe (``_handle_fromlist``), then the import
    statement's ``getattr``; only the second warns, so one use warns once."""
    moved = table.get(name)
    if moved is None:
        raise AttributeError(f"module {owner!r} has no attribute {name!r}")
    where, attribute = moved.shim or (moved.module, moved.name)
    value = getattr(importlib.import_module(where), attribute)
    asker = sys._getframe(depth + 1).f_code
    if not (asker.co_name == "_handle_fromlist" and "importlib" in asker.co_filename):
        warnings.warn(message(f"{owner}.{name}", moved), DeprecationWarning, stacklevel=depth + 2)
    return value


def moved_module(old: str, new: str) -> None:
    """Warn that the module ``old``, being imported, moved to ``new``: called from the
    body of a module kept at its old path (which re-exports the new one's names), it
    warns once per import, pointing at the user's import statement (``warnings`` skips
    the import system's own frames)."""
    text = f"{old} is deprecated: use `{new}`; the old module goes in runkernel {REMOVED_IN}"
    warnings.warn(text, DeprecationWarning, stacklevel=3)  # 1: here, 2: the old module, 3: its importer


def moved_names(owner: str, table: Mapping[str, Moved]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that resolves each old name of ``table`` (``resolve``)."""

    def __getattr__(name: str) -> Any:
        return resolve(owner, name, table)

    return __getattr__


class RenamedClass(type):
    """The metaclass of a shim for a class that was renamed to one with another
    constructor: ``isinstance(x, Shim)`` and ``issubclass(C, Shim)`` ask the new class
    (``__new_class__``), and calling the shim builds an instance of the new class from
    the old arguments (``__build__``). Type checkers see the new class under the old
    name instead (an alias in an ``if TYPE_CHECKING`` block), so only a call with the
    old arguments needs this at run time."""

    __new_class__: type
    __build__: Callable[..., Any]

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, cls.__new_class__)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls.__new_class__)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls.__build__(*args, **kwargs)


__all__ = ["REMOVED_IN", "Moved", "RenamedClass", "message", "moved_module", "moved_names", "renamed_attribute", "resolve"]
