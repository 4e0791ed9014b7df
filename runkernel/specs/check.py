"""``check_trace``: the conformance judge as one call, for hosts and other runtimes' tests."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from runkernel.kernel.state import ThreadCommit
from runkernel.specs.checker import Finding, check_commits, check_file


def check_trace(trace: str | os.PathLike[str] | Iterable[ThreadCommit]) -> Finding:
    """Judge a trace: a file of ``runkernel`` JSON lines (a path), or commits already in
    memory (for example ``store.commits(thread_id)``). The ``Finding`` says LEGAL, or the
    first illegal or unreadable line and the rule it breaks."""
    if isinstance(trace, (str, os.PathLike)):
        return check_file(Path(trace))
    return check_commits(trace)


__all__ = ["check_trace"]
