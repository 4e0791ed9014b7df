"""``runkernel ui``: a web console for Runs, calls and approvals (the ``ui`` extra).

``runkernel.ui.app.create_app`` builds the ASGI application over a store URL (it loads
Starlette and Jinja2); ``runkernel.cli.ui`` serves it with uvicorn. ``runkernel.ui.views``
holds what the pages show, read from a store, and needs no web stack. ``import
runkernel`` and the CLI's other commands never import this package.
"""
