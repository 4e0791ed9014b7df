"""The console's guards, in front of every route: the access token, the Host header,
cross-site forms, and headers that keep committed (hostile) data inert.

- **Token**: a random token is printed when the console starts. A request carries it
  once as ``?token=`` (the printed URL): the console answers with an HttpOnly,
  SameSite=Strict cookie and a redirect to the same page without the token, as Jupyter
  does. Every other request needs that cookie (or ``Authorization: Bearer TOKEN``);
  without it: 403 and nothing read.
- **Host**: only the names the console was bound to are served (a DNS-rebinding page
  cannot reach it through a name of its own).
- **Cross-site forms**: every request that is not a GET must come from the console's
  own origin (its Origin header), and every form carries a CSRF value derived from the
  token (HMAC), which the form's route checks (``checked_form``) before reading it.
- **Headers**: a Content-Security-Policy without inline scripts, so a ``<script>``
  that escaped the templates' escaping would still not run; no framing; no sniffing.
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

COOKIE = "runkernel_ui_token"

#: The Content-Security-Policy of every answer: the console's own script and style only
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def new_token() -> str:
    """A random access token (256 bits)."""
    return secrets.token_urlsafe(32)


def csrf_value(token: str) -> str:
    """The CSRF value every form carries: derived from the token, so a page of another
    site can neither read nor guess it."""
    return hmac.new(token.encode(), b"runkernel-ui-csrf", hashlib.sha256).hexdigest()


class Guard:
    """The checks every request passes before a route sees it."""

    def __init__(self, token: str, hosts: frozenset[str] | None) -> None:
        self.token = token
        #: the Host header values served (host or host:port); None serves any (a bind
        #: on all interfaces, where the operator chose the names)
        self.hosts = hosts

    def _has_token(self, request: Request) -> bool:
        offered = request.cookies.get(COOKIE, "")
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            offered = offered or header[7:].strip()
        return bool(offered) and hmac.compare_digest(offered.encode(), self.token.encode())

    def _host_ok(self, request: Request) -> bool:
        if self.hosts is None:
            return True
        host = request.headers.get("host", "")
        return host in self.hosts or host.rsplit(":", 1)[0] in self.hosts

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
        offered = request.query_params.get("token")
        if offered is not None and request.method == "GET":
            if not hmac.compare_digest(offered.encode(), self.token.encode()):
                return _refused(403, "runkernel ui: wrong token; open the URL printed when the console started")
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urllib.parse.urlencode(rest) if rest else "")
            answer = RedirectResponse(target, status_code=303)
            answer.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            return _hardened(answer)
        if not self._has_token(request):
            return _refused(403, "runkernel ui: no access token; open the URL printed when the console started")
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
