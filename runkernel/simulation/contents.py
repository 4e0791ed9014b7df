"""Deprecated: moved to ``runkernel.testing.simulation.contents``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.contents import (
    check_contents as check_contents,
)

moved_module(__name__, "runkernel.testing.simulation.contents")
