"""Deprecated: the simulator moved to ``runkernel.testing.simulation`` (and its scripted
actors to ``runkernel.testing``). These modules keep the old import paths working for
one release: each warns when imported (``DeprecationWarning``)."""
