"""A view of a driver's copy of a Thread's messages: read once, then grown by each
commit's delta.

Cost model: a driver never re-reads or re-decodes a Thread's history per
step. Its log is append-only, so the messages an inference sees are a prefix of it,
handed out as a read-only ``MessagesSoFar`` view in constant time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from runkernel.kernel.state import Message


class MessagesSoFar(Sequence[Message]):
    """The Thread's messages as they were when this view was handed out (to a model
    port, or in a driver's ``Infer``): the first ``len(self)`` messages of the log,
    fixed and read-only, made without a copy whatever the length of the history."""

    __slots__ = ("_log", "_length")

    def __init__(self, log: list[Message]) -> None:
        self._log = log
        self._length = len(log)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return tuple(self._log[: self._length][index])
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError("message index out of range")
        return self._log[position]

    def __iter__(self) -> Iterator[Message]:
        log = self._log
        for position in range(self._length):
            yield log[position]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(other) == self._length and all(a == b for a, b in zip(self, other))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MessagesSoFar({self._length} messages)"  # cheap at any length

