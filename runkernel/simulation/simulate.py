"""Deprecated: moved to ``runkernel.testing.simulation.simulate``; this alias goes in the next
release."""

import warnings

from runkernel.testing.simulation.simulate import (
    Report as Report,
    baselines as baselines,
    boundary_counts as boundary_counts,
    Progress as Progress,
    simulate as simulate,
    format_report as format_report,
)

warnings.warn(
    "runkernel.simulation.simulate moved to runkernel.testing.simulation.simulate; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
