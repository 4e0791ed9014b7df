"""The root of every error runkernel raises on purpose.

``except runkernel.RunkernelError`` catches them all. The classes themselves live beside
the code that raises them and say whose fault it is:

- a store refused or failed (``StoreError``: ``CommitConflict`` another writer won,
  ``IllegalCommit`` the commit breaks a rule, ``StoreUnavailable``, ...);
- a peer answered something the kernel refused (``RuntimeProtocolError`` for a port of
  the pull-mode runtime, ``HostProtocolError`` for the host of the push-mode driver);
- a host misconfigured a driver (``DriverError`` and its subclasses, e.g. ``UnknownTool``);
- ``RejectedError`` wraps a kernel ``Rejection`` where a convenience wrapper raises it;
- ``KernelBug``: the kernel built a commit its own judge rejects (a bug in runkernel).

This module has no dependencies, so the pure kernel may import it.
"""

from __future__ import annotations


class RunkernelError(Exception):
    """Base class of every error runkernel raises on purpose. Never raised itself."""

    def __new__(cls, *args: object, **kwargs: object) -> RunkernelError:
        if cls is RunkernelError:
            raise TypeError("RunkernelError is a base class; raise one of its subclasses")
        return super().__new__(cls, *args, **kwargs)


__all__ = ["RunkernelError"]
