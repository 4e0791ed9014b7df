"""The worker app of the ride-out tests: the race test's app (a replay, a reconnect and
an indeterminate tool, each start recorded downstream), holding at the planned points."""

from __future__ import annotations

from held_points import held_app
from race_app import app as race
from runkernel.adapters.worker.apps import RuntimeApp


def app() -> RuntimeApp:
    """What ``runkernel worker --app ride_out_app:app`` loads."""
    return held_app(race)
