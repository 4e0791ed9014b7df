"""Issue 36, item 3: a password is masked in every message in the form the user typed it,
percent-decoded and percent-encoded (``%40`` and ``@`` alike): one test per form the
message shows, for a password typed each way, and the CLI's own messages."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest

from runkernel.adapters.stores.redact import masked, redacted
from runkernel.cli.entry import main

#: the password as a user means it, and the two ways a URL may carry it
MEANT = "p@ss:w/rd%x"
ENCODED = urllib.parse.quote(MEANT, safe="")  # p%40ss%3Aw%2Frd%25x
TYPED = {"typed encoded": ENCODED, "typed unencoded": MEANT}
#: how a message may show it: as typed, percent-decoded, percent-encoded (also with "/"
#: kept and "+" for a space, as urllib and libpq write a query)
SHOWN: dict[str, Callable[[str], str]] = {
    "as typed": lambda typed: typed,
    "percent-decoded": urllib.parse.unquote,
    "percent-encoded": lambda typed: urllib.parse.quote(urllib.parse.unquote(typed), safe=""),
    "percent-encoded, / kept": lambda typed: urllib.parse.quote(urllib.parse.unquote(typed)),
    "query-encoded": lambda typed: urllib.parse.quote_plus(urllib.parse.unquote(typed)),
}


@pytest.mark.parametrize("typed", sorted(TYPED))
@pytest.mark.parametrize("shown", sorted(SHOWN))
@pytest.mark.parametrize("where", ["user-info", "query"])
def test_a_password_is_masked_in_every_form_a_message_shows_it(typed: str, shown: str, where: str) -> None:
    password = TYPED[typed]
    url = (
        f"postgresql://app:{password}@db:5432/agents"
        if where == "user-info"
        else f"postgresql://app@db:5432/agents?password={password}&sslmode=require"
    )
    form = SHOWN[shown](password)
    message = masked(f"libpq said: connection to {form} failed, and {form} again", url)
    assert form not in message and urllib.parse.unquote(password) not in message, message
    assert "***" in message
    assert password not in redacted(url) and urllib.parse.unquote(password) not in redacted(url)


@pytest.mark.parametrize("typed", sorted(TYPED))
def test_the_cli_shows_no_form_of_the_password(typed: str, capsys: pytest.CaptureFixture[str]) -> None:
    password = TYPED[typed]
    for url in (
        f"postgresql://fz:{password}@127.0.0.1:99999/db",
        f"postgresql://fz@127.0.0.1:5432/fz_nodb?password={password}&bogus=1",
        f"postgresql:/fz:{password}@127.0.0.1/db",
    ):
        assert main(["runs", "--store", url]) == 2
        err = capsys.readouterr().err
        forms = {show(password) for show in SHOWN.values()}
        assert not [f for f in forms if f in err], err


def test_a_service_file_keeps_the_connection_out_of_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What docs/how-to/postgres.md gives as a way to keep a password out of ``ps``: a
    URL with an empty authority naming a service (its "//" was once lost on the way to
    libpq, which then refused the URL)."""
    from postgres_support import dsn, fresh_url
    from runkernel.adapters.stores.postgres.schema import drop_store, split_url

    server = urllib.parse.urlsplit(dsn())
    service = tmp_path / "pg_service.conf"
    service.write_text(
        f"[rk_test]\nhost={server.hostname}\nport={server.port or 5432}\n"
        f"user={server.username}\ndbname={server.path.lstrip('/')}\n"
    )
    monkeypatch.setenv("PGSERVICEFILE", str(service))
    _, schema = split_url(fresh_url("service"))
    url = f"postgresql:///?service=rk_test&schema={schema}"
    try:
        assert main(["db", "init", "--store", url]) == 0
        assert main(["runs", "--store", url]) == 0
        assert "runkernel store created" in capsys.readouterr().out
    finally:
        drop_store(f"{dsn()}{'&' if '?' in dsn() else '?'}schema={schema}")
