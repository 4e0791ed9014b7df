"""A loopback TCP proxy in front of the PostgreSQL server that cuts a connection at a
chosen point of a commit: after the server received the commit (its reply, which says
COMMIT succeeded, is dropped: a lost acknowledgement) or before the server sees it.

A commit is recognized by its line, sent as a parameter (``"trace":"runkernel/2"``),
so connections through the proxy must not use TLS (``sslmode=disable``); another write
is recognized by a marker of its own (``marker``: bytes its statement carries)."""

from __future__ import annotations

import enum
import socket
import threading

COMMIT_MARKER = b'"trace":"runkernel/2"'


class Cut(enum.Enum):
    """Where the proxy cuts the connection carrying a commit."""

    AFTER_COMMIT = "after-commit"  # the server committed; its reply never reaches the client
    BEFORE_SERVER = "before-server"  # the commit never reaches the server
    MID_MESSAGE = "mid-message"  # the server gets the first half of the message, then the cut


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to the server; cuts the connection of the commits (the
    messages that carry ``marker``) whose number (1-based, counted across connections)
    is in ``cuts``."""

    def __init__(
        self, server_host: str, server_port: int, cuts: dict[int, Cut], marker: bytes = COMMIT_MARKER
    ) -> None:
        self.server = (server_host, server_port)
        self.marker = marker
        self.cuts = dict(cuts)
        self.commits_seen = 0
        self.cut_done: list[tuple[int, Cut]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.server)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            dropping = threading.Event()
            threading.Thread(target=self._upstream, args=(client, server, dropping), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, dropping), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, dropping: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                cut = None
                if self.marker in data:
                    with self._lock:
                        self.commits_seen += 1
                        cut = self.cuts.pop(self.commits_seen, None)
                        if cut is not None:
                            self.cut_done.append((self.commits_seen, cut))
                if cut is Cut.BEFORE_SERVER:
                    break
                if cut is Cut.MID_MESSAGE:
                    server.sendall(data[: len(data) // 2])
                    break
                if cut is Cut.AFTER_COMMIT:
                    dropping.set()
                server.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _downstream(self, server: socket.socket, client: socket.socket, dropping: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if dropping.is_set():
                    break  # the server answered the commit: it is durable; drop the answer
                client.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def close(self) -> None:
        self._closed = True
        self._listener.close()


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
