"""The console's guards, in front of every route: the access path, the Host header,
cross-site forms, and headers that keep committed (hostile) data inert.

Threat model. The console runs on the operator's machine beside other local web servers
(a dev server, a notebook, a page someone else serves on another port), and the operator's
browser visits them too. A browser scopes cookies by host name, not by port (RFC 6265):
a cookie set for ``127.0.0.1`` is sent to every port of it, whatever its name, so a
console that kept its credential in a cookie handed it to every other local server the
browser opened, and with that value alone ``curl`` read the CSRF value, forged the Origin
and queued an approval (issue 36). Two consoles shared the one cookie too, so opening the
second logged the first out. So the credential is never a cookie, a header or anything
else a browser sends to another origin:

- **Access path**: every route lives under a random path, ``/<token>/`` (256 bits),
  printed once when the console starts (``open http://127.0.0.1:8765/<token>/``). A
  request for any other path is refused (403) before anything is read. Only the console's
  origin ever sees its own URLs: the pages link only to the console, and every answer
  carries ``Referrer-Policy: same-origin``, so a link or a script taking the browser to
  another site sends no Referer. The console sets no cookie and reads none: a value
  another local server could log (a cookie of 127.0.0.1, a bearer header, a
  ``?token=``) opens nothing. Page navigation and plain form posts work without
  JavaScript, and each console has its own path, so consoles side by side all work.
  The URL is the credential: treat it as a password (it is in the browser's history of
  the operator's own profile, as a cookie would be in its cookie jar).
- **Host**: only the names the console was bound to are served (a DNS-rebinding page
  cannot reach it through a name of its own); ``--allow-remote`` keeps this check.
- **Cross-site forms**: every request that is not a GET must come from the console's
  own origin (its Origin header), and every form carries a CSRF value derived from the
  token (HMAC), which the form's route checks (``checked_form``) before reading it.
- **Headers**: a Content-Security-Policy without inline scripts, so a ``<script>``
  that escaped the templates' escaping would still not run; no framing; no sniffing.

Out of scope: a program running as the operator (it can read the terminal and the
browser profile) and anyone who is given the printed URL.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

#: The Content-Security-Policy of every answer: the console's own script and style only
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def new_token() -> str:
    """A random access token (256 bits)."""
    return secrets.token_urlsafe(32)


def base_path(token: str) -> str:
    """The path every route of the console lives under: the token is the credential."""
    return "/" + token


def csrf_value(token: str) -> str:
    """The CSRF value every form carries: derived from the token, so a page of another
    site can neither read nor guess it."""
    return hmac.new(token.encode(), b"runkernel-ui-csrf", hashlib.sha256).hexdigest()


class Guard:
    """The checks every request passes before a route sees it."""

    def __init__(self, token: str, hosts: frozenset[str]) -> None:
        self.token = token
        #: the path every route lives under
        self.base = base_path(token)
        #: the Host header values served (host or host:port)
        self.hosts = hosts

    def _host_ok(self, request: Request) -> bool:
        host = request.headers.get("host", "")
        return host in self.hosts or host.rsplit(":", 1)[0] in self.hosts

    def _has_path(self, request: Request) -> bool:
        """The request is for a path under the console's access path (compared in
        constant time: the path is the credential)."""
        first = request.url.path.split("/", 2)[1] if request.url.path.startswith("/") else ""
        return hmac.compare_digest(first.encode(), self.token.encode())

    def _same_origin(self, request: Request) -> bool:
        """A POST comes from the console's own pages: its Origin (or, without one, its
        Referer) names the host it was sent to."""
        origin = request.headers.get("origin") or request.headers.get("referer")
        if origin is None:
            return False
        netloc = urllib.parse.urlsplit(origin).netloc
        return bool(netloc) and netloc == request.headers.get("host", "")

    async def __call__(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if not self._host_ok(request):
            return _refused(400, "runkernel ui: unknown Host header (the console answers only its own address)")
        if not self._has_path(request):
            return _refused(403, "runkernel ui: not the console's address; open the URL printed when the console started")
        if request.url.path == self.base:
            return _hardened(RedirectResponse(self.base + "/", status_code=303))
        if request.method not in ("GET", "HEAD") and not self._same_origin(request):
            return _refused(403, "runkernel ui: cross-site request refused (Origin is not the console)")
        return _hardened(await call_next(request))

    async def checked_form(self, request: Request) -> FormData | None:
        """The form of a POST if it carries this console's CSRF value, else None (the
        body is read here, by the route: a middleware that read it would consume it)."""
        form = await request.form()
        sent = form.get("csrf")
        if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), csrf_value(self.token).encode()):
            return None
        return form


def csrf_refusal() -> Response:
    """The answer to a form without the console's CSRF value."""
    return _refused(403, "runkernel ui: this form did not come from the console (CSRF value missing or wrong)")


def _refused(status: int, text: str) -> Response:
    return _hardened(PlainTextResponse(text + "\n", status_code=status))


def _hardened(response: Response) -> Response:
    response.headers["content-security-policy"] = CSP
    response.headers["x-content-type-options"] = "nosniff"
    response.headers["x-frame-options"] = "DENY"
    response.headers["referrer-policy"] = "same-origin"
    response.headers["cache-control"] = "no-store"
    return response
