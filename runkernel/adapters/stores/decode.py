"""Guarded decoding of values read from a SQL store (SQLite or PostgreSQL): any failure
is a DamagedStore naming the row, never a raw JSONDecodeError, ValueError or KeyError
from a read."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from runkernel.adapters.stores.contract import DamagedStore
from runkernel.kernel.state import ThreadHead
from runkernel.kernel.values import JsonValue

#: What decoding a damaged stored value can raise (TraceFormatError is a ValueError).
_DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError)


def decoded(store: str, where: str, decode: Callable[[], Any]) -> Any:
    """``decode()``, with any failure reported as a DamagedStore naming the store and
    the row."""
    try:
        return decode()
    except _DECODE_ERRORS as error:
        raise DamagedStore(f"{store}: the {where} is damaged: {error}") from None


def integer(value: Any) -> int:
    """A stored integer column, refused when it holds anything else."""
    if type(value) is not int:
        raise ValueError(f"expected an integer, found {value!r}")
    return value


def json_text(text: Any) -> JsonValue:
    """A stored JSON text column, decoded."""
    if not isinstance(text, str):
        raise ValueError(f"expected JSON text, found {type(text).__name__}")
    value: JsonValue = json.loads(text)
    return value


def thread_head(thread_id: str, version: Any, active_run_id: Any) -> ThreadHead:
    """A threads row, with its column types checked."""
    if active_run_id is not None and not isinstance(active_run_id, str):
        raise ValueError(f"active_run_id {active_run_id!r} is not text")
    return ThreadHead(thread_id, integer(version), active_run_id)
