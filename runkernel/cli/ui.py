"""``runkernel ui``: serve the web console (the ``ui`` extra: Starlette, Jinja2, uvicorn).

The console's modules are imported only when this command runs, so the CLI's other
commands (and ``import runkernel``) never load a web stack. It binds a loopback address
unless ``--allow-remote`` says that another machine may reach it; the Host check stays on
either way (``_hosts``). SIGTERM and SIGINT stop it: the server finishes the requests in
flight and the command exits 0.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import socket
import sys
from types import FrameType

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
    if not args.allow_remote and not _loopback(args.host):
        raise CliError(
            f"--host {args.host} is not a loopback address: other machines could reach the console; "
            "add --allow-remote to mean it",
            EXIT_USAGE,
        )
    try:
        import uvicorn

        from runkernel.ui.app import create_app
        from runkernel.ui.security import base_path, new_token
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
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", server_header=False))

    def stop(signum: int, frame: FrameType | None) -> None:
        # before uvicorn takes the signals (the URL is out: a stop may come at once), and
        # after: uvicorn restores the handlers it found, then raises the signal it stopped
        # on again; this handler takes it, so a stop is exit 0, not death by the signal
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    print(f"open http://{shown}:{port}{base_path(token)}/", flush=True)
    try:
        server.run(sockets=[listening])
    finally:
        listening.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_OK


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``: only this machine reaches it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values the console answers, never any: the name or address it was
    bound to, plus its loopback names on a loopback or wildcard bind, and on a wildcard
    bind (``--allow-remote``) this machine's names and addresses as it knows them."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        names = {host} | ({"127.0.0.1", "[::1]"} if host == "localhost" else set())
        return frozenset(names | {f"{name}:{port}" for name in names})
    names = {f"[{host}]" if address.version == 6 else host}
    if address.is_loopback or address.is_unspecified:
        names |= {"localhost", "127.0.0.1", "[::1]"}
    if address.is_unspecified:
        names |= _machine_names()
    return frozenset(names | {f"{name}:{port}" for name in names})


def _machine_names() -> set[str]:
    """This machine's host name, its fully qualified name and their addresses."""
    names = {socket.gethostname(), socket.getfqdn()}
    for name in list(names):
        try:
            found = socket.getaddrinfo(name, None)
        except OSError:
            continue
        for family, *_, sockaddr in found:
            text = str(sockaddr[0]).split("%")[0]
            names.add(f"[{text}]" if family == socket.AF_INET6 else text)
    return {name for name in names if name}


def register_ui(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui`` to the parser."""
    ui = commands.add_parser(
        "ui",
        help="serve a web console for Runs, calls and approvals (the ui extra)",
        description=(
            "Serve the web console: Runs, one Run, Approvals. It binds 127.0.0.1 unless told "
            "otherwise and prints its URL, whose path is a random access token: every page and "
            "form lives under it, and no cookie is set, so no other local server ever receives "
            "it. A non-loopback --host needs --allow-remote. --read-only serves no route that "
            "writes. SIGTERM or SIGINT stops it (exit 0)."
        ),
    )
    _store_option(ui, default=None)
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default: 127.0.0.1)")
    ui.add_argument("--port", type=int, default=8765, help="the port (default: 8765)")
    ui.add_argument("--read-only", action="store_true", help="no Approve, Deny, input or reconcile: pages only")
    ui.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other machines can reach (0.0.0.0, a LAN address or name); "
        "the Host check stays on, with the bound name or this machine's names",
    )
    ui.set_defaults(handler=_ui)
