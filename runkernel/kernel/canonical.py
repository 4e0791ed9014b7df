"""The resume command's digest: SHA-256 of its RFC 8785 (JCS) canonical form.

JCS fixes key order (UTF-16 code units), number formatting (ECMAScript's shortest
round-trip form) and string escaping, so a runtime in any language that has a JCS
implementation recomputes the same digest. The canonical form is produced by the
maintained ``rfc8785`` package; ``tests/test_resume_judge.py`` checks it against the
RFC's published examples. Pure: no I/O.
"""

from __future__ import annotations

import hashlib

import rfc8785

from runkernel.kernel.values import JsonValue, ijson_problem


class NotIJson(ValueError):
    """The value is outside I-JSON (RFC 7493): it has no canonical form to digest."""


def canonical_bytes(value: JsonValue) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of an I-JSON value; raises ``NotIJson``."""
    problem = ijson_problem(value)
    if problem is not None:
        raise NotIJson(problem)
    return rfc8785.dumps(value)


def jcs_digest(value: JsonValue) -> str:
    """Lowercase hex SHA-256 of the value's RFC 8785 canonical form."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
