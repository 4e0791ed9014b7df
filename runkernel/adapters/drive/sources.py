"""Where a driver gets what the kernel never makes up: ids the host does not give
(``IdSource``; ``SecretIds`` from ``secrets``) and the time (``Clock``; ``utc_now``).
Tests seed both (``runkernel.testing``)."""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Callable
from typing import Protocol, TypeAlias


class IdSource(Protocol):
    """Where a driver gets the ids the host does not give (seed it in tests)."""

    def new_id(self, prefix: str) -> str:
        """A unique id for a batch, call, operation or Run."""
        ...

    def ticket_id(self) -> str:
        """A never-reused ticket id with at least 128 random bits."""
        ...


class SecretIds:
    """Ids from ``secrets``: 192 random bits for tickets, 128 for everything else."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(16)}"

    def ticket_id(self) -> str:
        return f"tk_{secrets.token_urlsafe(24)}"


Clock: TypeAlias = Callable[[], str]


def utc_now() -> str:
    """UTC ISO-8601 with a fixed width, so timestamps compare as strings."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


__all__ = ["Clock", "IdSource", "SecretIds", "utc_now"]
