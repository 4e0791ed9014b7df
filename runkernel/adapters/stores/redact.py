"""A store URL as messages show it: without its passwords. Its own module, so that the
PostgreSQL modules need not import ``registry`` (which opens them).

Masking must hold however malformed the URL is: a password with an unencoded ``@``,
``:``, ``/`` or ``%`` makes a URL parser (and libpq) split it somewhere else, and the
pieces can reach a message (libpq quotes what it could not read). So the user-info
password is taken conservatively, up to the *last* ``@`` of the authority (everything
that may be password is masked), and ``masked`` also hides any quoted piece of a
message that shares a run of characters with a password.
"""

from __future__ import annotations

import re
import urllib.parse

#: libpq takes a password in the query too (``password=``, ``sslpassword=``); a value
#: runs to the next ``&name=`` (an unencoded ``&`` inside it is still masked)
_QUERY_SECRET = re.compile(r"(?i)(^|[?&])([^=&?]*password)=(?:[^&]|&(?![^=&]*=))*")

#: the shortest run of a password's characters that ``masked`` hides wherever it appears
#: in a quoted piece of a message (shorter runs are too common to mean anything)
_FRAGMENT = 3

_QUOTED = re.compile(r'"[^"]*"|\'[^\']*\'')


#: A scheme and the slashes after it; a URL without one (``user:pw@host``, a scheme
#: mistyped with one slash or none) is read from its start.
_HEAD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/+")


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme and slashes, user-info, authority and path, ``?query``) of a URL; the
    user-info ends at the last ``@`` before the query (or, if the query has none before
    it, the last ``@`` at all), so a password holding ``@``, ``/``, ``:`` or ``?`` is all
    inside it. A URL without ``scheme:/`` (one mistyped ``postgresql:fz:pw@host``) is
    read as user-info from its start, so its password is masked all the same."""
    head = _HEAD.match(url)
    scheme = head.group(0) if head else ""
    rest = url[len(scheme):]
    question = rest.find("?")
    before = rest if question < 0 else rest[:question]
    at = before.rfind("@")
    if at < 0:
        at = rest.rfind("@")
    if at < 0:
        user_info, remainder = "", rest
    else:
        user_info, remainder = rest[:at], rest[at + 1:]
    question = remainder.find("?")
    host_path, query = (remainder, "") if question < 0 else (remainder[:question], remainder[question:])
    return scheme, user_info, host_path, query


def redacted(url: str) -> str:
    """The URL without its passwords (user-info and query parameters), for messages."""
    head, user_info, host_path, query = _split(url)
    if ":" in user_info:
        user_info = user_info.partition(":")[0] + ":***"
    at = "@" if user_info or "@" in url[len(head):] else ""
    return head + user_info + at + host_path + _QUERY_SECRET.sub(r"\1\2=***", query)


def secrets_of(url: str) -> list[str]:
    """The passwords a URL holds (user-info and query): as written, percent-decoded and
    percent-encoded (``%40`` and ``@`` alike)."""
    found: list[str] = []
    _, user_info, _, query = _split(url)
    if ":" in user_info:
        found.append(user_info.partition(":")[2])
    found += [m.group(0).partition("=")[2] for m in _QUERY_SECRET.finditer(query)]
    found += [urllib.parse.unquote(s) for s in found]
    # and as a URL or a query may write it back: percent-encoded ("/" too or not) and
    # query-encoded, so "p@ss" typed is also hidden where a message shows "p%40ss"
    meant = [urllib.parse.unquote(s) for s in found]
    found += [urllib.parse.quote(s, safe="") for s in meant] + [urllib.parse.quote(s) for s in meant]
    found += [urllib.parse.quote_plus(s) for s in meant]
    return [s for s in dict.fromkeys(found) if s]


def masked(message: str, *urls: str) -> str:
    """``message`` with each URL as ``redacted`` shows it, each password replaced by
    ``***`` wherever it appears, and every quoted piece that shares a run of
    ``_FRAGMENT`` characters with a password replaced by ``"***"``."""
    secrets: list[str] = []
    for url in urls:
        if url:
            message = message.replace(url, redacted(url))
            secrets += secrets_of(url)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _FRAGMENT:
            message = message.replace(secret, "***")
    runs = {s[i:i + _FRAGMENT] for s in secrets for i in range(len(s) - _FRAGMENT + 1)}
    if not runs:
        return message

    def hide(match: re.Match[str]) -> str:
        piece = match.group(0)
        return '"***"' if any(run in piece for run in runs) else piece

    return _QUOTED.sub(hide, message)


__all__ = ["masked", "redacted", "secrets_of"]
