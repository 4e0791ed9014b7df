"""The store as ``simulate`` sees it: a real store failure stops the simulation.

The engine treats ``StoreUnavailable`` as a transient failure worth retrying, which is
right for the failures scenarios inject and wrong for the environment: a full disk or
a locked file would be retried for every round of every Run and reported as thousands
of invariant violations. Wrapped in ``FailFastStore``, the first failure of the real
store becomes ``EnvironmentFailure``, which no part of the engine or runtime catches,
so ``simulate`` stops there and reports it as what it is. The failures a scenario
injects (checkpoint writes, ``CrashingStore.fail_checkpoints``) are raised outside this
wrapper, so they stay what the runtime retries or gives up on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from runkernel.adapters.stores.contract import (
    CommitConflict,
    IllegalCommit,
    Store,
    StoreError,
)


class EnvironmentFailure(Exception):
    """The store under a simulation failed: not a kernel or runtime fault."""


#: Refusals that are answers of a working store, part of what the simulation judges.
_ANSWERS = (CommitConflict, IllegalCommit)


class FailFastStore:
    """Forwards every store call; a store failure becomes EnvironmentFailure."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not callable(attribute):
            return attribute
        return _guarded(attribute)

    def store(self) -> Store:
        """This wrapper typed as the Store it stands for."""
        return cast(Store, self)


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except _ANSWERS:
            raise
        except StoreError as error:
            raise EnvironmentFailure(str(error)) from None

    return call
