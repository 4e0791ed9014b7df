"""A store URL as messages show it: without its passwords. Its own module, so that the
PostgreSQL modules need not import ``urls`` (which opens them)."""

from __future__ import annotations

import re
import urllib.parse

#: libpq takes a password in the query too (``password=``, ``sslpassword=``)
_QUERY_SECRET = re.compile(r"(?i)(^|&)([^=&]*password)=[^&]*")


def redacted(url: str) -> str:
    """The URL without its passwords (user-info and query parameters), for messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # a port that is not a number: keep what can be kept
        return _QUERY_SECRET.sub(r"\1\2=***", url)
    netloc = parts.netloc
    if password is not None:
        user_info, _, host = netloc.rpartition("@")
        netloc = f"{user_info.partition(':')[0]}:***@{host}"
    query = _QUERY_SECRET.sub(r"\1\2=***", parts.query)
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # urlunsplit would also rewrite sqlite:///a.db as sqlite:/a.db
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


__all__ = ["redacted"]
