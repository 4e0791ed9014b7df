"""``runkernel ui``: a web console for Runs, calls and approvals (the ``ui`` extra).

Importing this package loads Starlette and Jinja2; ``import runkernel`` and the CLI's
other commands never import it. ``create_app`` builds the ASGI application over a store
URL; ``runkernel.cli.ui`` serves it with uvicorn.
"""

from __future__ import annotations

from runkernel.ui.app import create_app

__all__ = ["create_app"]
