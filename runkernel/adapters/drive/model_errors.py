"""Transient model errors (Public API): which exceptions of a model call are
worth another attempt, how many attempts a Run gets in one driver's hands, and how long
to wait between them.

A model call that raises commits nothing. The one interpreter (``DriverCore``) asks the
host's predicate, ``transient(error)``: a transient error under the attempt budget hands
the same ``Infer`` again, its ``retry_after`` the capped exponential backoff to wait
first (1, 2, 4, 8 s, then 10 s) and the Run stays Running; a non-transient error, or the
``model_attempts``-th failed attempt in a row, ends the Run ``failed`` with the error as
a ``TypedError`` (its type's name and message). The count lives in the driver (or the
pull-mode drive) that saw the failures: it is never committed, so it restarts when
another driver picks the Run up (after a take-over, a crash, or a push host's new
driver), and a successful inference resets it.

By default (``transient_model_error``) an error is transient when it is a timeout or a
dropped connection (Python's ``TimeoutError`` and ``ConnectionError``, which
``asyncio`` and most network libraries raise or subclass), or when it carries an HTTP
``status_code`` of 408, 409, 429 or 5xx, as the OpenAI and Anthropic SDKs' errors do (a
rate limit, an overloaded or failing server): the errors those SDKs retry themselves.
Anything else (a bad request, a refused key, a bug in the host's code) is not. Give
``transient=`` to decide otherwise (``lambda error: False`` ends the Run at the first
error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from runkernel.kernel.state import TypedError

#: Classifies an exception a model call raised: True if another attempt may succeed.
TransientPredicate: TypeAlias = Callable[[BaseException], bool]

#: Attempts of one model call a Run gets in one driver's hands before it ends ``failed``.
DEFAULT_MODEL_ATTEMPTS = 5

#: The first wait after a transient error, and the most any wait grows to (seconds): the
#: cap stays well under the default lease (30 s), which a push driver renews when it
#: hands the ``Infer`` again, so a host that waits ``retry_after`` keeps its lease.
MODEL_BACKOFF_FIRST = 1.0
MODEL_BACKOFF_CAP = 10.0

_TRANSIENT_STATUS = frozenset({408, 409, 429})


def transient_model_error(error: BaseException) -> bool:
    """The default predicate: a timeout, a dropped connection, or an HTTP status of 408,
    409, 429 or 5xx on the error's ``status_code``."""
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and (status in _TRANSIENT_STATUS or 500 <= status <= 599)


def model_backoff(failures: int) -> float:
    """Seconds to wait after the ``failures``-th failed attempt in a row (1-based):
    doubling from ``MODEL_BACKOFF_FIRST``, at most ``MODEL_BACKOFF_CAP``."""
    if failures < 1:
        raise ValueError(f"a backoff follows a failure: failures must be >= 1, not {failures}")
    return min(MODEL_BACKOFF_CAP, MODEL_BACKOFF_FIRST * 2.0 ** (failures - 1))


def model_error(error: BaseException) -> TypedError:
    """The error a Run ends ``failed`` with: the exception's type name and message."""
    return TypedError(type(error).__name__, str(error))


def checked_attempts(model_attempts: int) -> int:
    """``model_attempts`` if it is at least one (the first call is an attempt)."""
    if isinstance(model_attempts, bool) or not isinstance(model_attempts, int) or model_attempts < 1:
        raise ValueError(f"model_attempts must be an int >= 1, not {model_attempts!r}")
    return model_attempts


__all__ = [
    "DEFAULT_MODEL_ATTEMPTS",
    "MODEL_BACKOFF_CAP",
    "MODEL_BACKOFF_FIRST",
    "TransientPredicate",
    "checked_attempts",
    "model_backoff",
    "model_error",
    "transient_model_error",
]
