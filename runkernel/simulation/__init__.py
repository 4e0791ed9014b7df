"""Deprecated: the simulator moved to ``runkernel.testing.simulation`` (and its scripted
actors to ``runkernel.testing``). These modules keep the old import paths working for
one release, with a ``DeprecationWarning``."""

import warnings

warnings.warn(
    "runkernel.simulation moved to runkernel.testing.simulation; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
