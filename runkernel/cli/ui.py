"""``runkernel ui``: serve the web console (the ``ui`` extra: Starlette, Jinja2, uvicorn).

The console's modules are imported only when this command runs, so the CLI's other
commands (and ``import runkernel``) never load a web stack.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys

from runkernel.adapters.stores.registry import open_store, redacted
from runkernel.cli.commands import _store_option
from runkernel.cli.text import EXIT_OK, EXIT_USAGE, CliError

#: what ``pip`` needs for this command
EXTRA_HINT = "runkernel ui needs the ui extra: pip install 'runkernel[ui]'"


def _ui(args: argparse.Namespace) -> int:
    if args.store == "memory:":
        raise CliError("memory: holds nothing outside one process; use --store sqlite:///path.db", EXIT_USAGE)
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0 to 65535, not {args.port}", EXIT_USAGE)
    try:
        import uvicorn

        from runkernel.ui.app import create_app
        from runkernel.ui.security import new_token
    except ImportError as error:
        raise CliError(f"{EXTRA_HINT} ({error})", EXIT_USAGE) from None
    open_store(args.store, create=False, read_only=True).close()  # a bad store fails here, in one line
    # bound here, before the URL is printed: once the line is out, connections are
    # accepted (queued until the server serves them), and --port 0 prints the real port
    try:
        listening = socket.create_server((args.host, args.port), family=_family(args.host))
    except OSError as error:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None
    port = int(listening.getsockname()[1])
    token = new_token()
    app = create_app(args.store, token, read_only=args.read_only, hosts=_hosts(args.host, port))
    shown = f"[{args.host}]" if ":" in args.host else args.host
    mode = " (read-only)" if args.read_only else ""
    print(f"runkernel ui{mode}: {redacted(args.store)}", file=sys.stderr)
    print(f"open http://{shown}:{port}/?token={token}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", server_header=False))
    try:
        server.run(sockets=[listening])
    finally:
        listening.close()
    return EXIT_OK


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _hosts(host: str, port: int) -> frozenset[str] | None:
    """The Host header values the console answers: its loopback names on a loopback
    bind; any on a wildcard bind (the operator names the host; the token still guards)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return frozenset({host, f"{host}:{port}"})
    if address.is_unspecified:
        return None
    names = {host, f"[{host}]" if address.version == 6 else host}
    if address.is_loopback:
        names |= {"localhost", "127.0.0.1", "[::1]"}
    return frozenset(names | {f"{name}:{port}" for name in names})


def register_ui(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui`` to the parser."""
    ui = commands.add_parser(
        "ui",
        help="serve a web console for Runs, calls and approvals (the ui extra)",
        description=(
            "Serve the web console: Runs, one Run, Approvals. It binds 127.0.0.1 unless told "
            "otherwise and prints a URL with a random access token, needed by every request "
            "(a cookie after the first visit). --read-only serves no route that writes."
        ),
    )
    _store_option(ui, default=None)
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default: 127.0.0.1)")
    ui.add_argument("--port", type=int, default=8765, help="the port (default: 8765)")
    ui.add_argument("--read-only", action="store_true", help="no Approve, Deny, input or reconcile: pages only")
    ui.set_defaults(handler=_ui)
