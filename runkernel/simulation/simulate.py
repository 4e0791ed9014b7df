"""Deprecated: moved to ``runkernel.testing.simulation.simulate``; this alias goes in runkernel
0.3."""

from runkernel._deprecation import moved_module
from runkernel.testing.simulation.simulate import (
    Report as Report,
    baselines as baselines,
    boundary_counts as boundary_counts,
    Progress as Progress,
    simulate as simulate,
    format_report as format_report,
)

moved_module(__name__, "runkernel.testing.simulation.simulate")
