"""runkernel's store contract suite, for any store: subclass ``StoreContract`` in your
own tests and give it a ``store`` fixture (see ``runkernel.conformance.suite``), and a
``store_factory`` (a ``StoreFactory``) to run its tests across processes; its tests
across instances open them with ``store.reopen()``, or a ``reopen`` fixture given
(``instances``, ``processes``; docs/how-to/store-contract.md).

The builders in ``runkernel.conformance.runs`` make legal commit sequences through the
kernel, for tests of a store's own specifics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runkernel.conformance.racing import StoreFactory
from runkernel.conformance.runs import DelegatingRun, awaiting_run, delegating_run, text_run, tool_run

if TYPE_CHECKING:
    from runkernel.conformance.suite import StoreContract, append_all


def __getattr__(name: str) -> Any:
    # the suite needs pytest, which only the tests have: the builders (and
    # ``runkernel simulate``, which uses them through runkernel.testing) must not
    if name in ("StoreContract", "append_all"):
        from runkernel.conformance import suite

        return getattr(suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DelegatingRun",
    "StoreContract",
    "StoreFactory",
    "append_all",
    "awaiting_run",
    "delegating_run",
    "text_run",
    "tool_run",
]
