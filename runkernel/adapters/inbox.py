"""Deprecated: moved to ``runkernel.adapters.drive.inbox``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.drive.inbox import (
    submit_end as submit_end,
    submit_resume as submit_resume,
)

moved_module(__name__, "runkernel.adapters.drive.inbox")
