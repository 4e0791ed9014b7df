"""runkernel's store contract suite, for any store: subclass ``StoreContract`` in your
own tests and give it a ``store`` fixture (see ``runkernel.conformance.suite``).

The builders in ``runkernel.conformance.runs`` make legal commit sequences through the
kernel, for tests of a store's own specifics.
"""

from runkernel.conformance.runs import DelegatingRun, awaiting_run, delegating_run, text_run, tool_run
from runkernel.conformance.suite import StoreContract, append_all

__all__ = [
    "DelegatingRun",
    "StoreContract",
    "append_all",
    "awaiting_run",
    "delegating_run",
    "text_run",
    "tool_run",
]
