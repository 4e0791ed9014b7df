"""The PostgreSQL store's schema: its tables, ``runkernel db init``, ``db migrate`` and
the recognition every other opening does (which never creates or alters anything).

A store lives in one PostgreSQL schema (namespace): ``public`` by default, or the one a
``?schema=NAME`` parameter of the store URL names, so several stores (one per test run)
share a database without colliding. ``meta`` names the layout and its version.
"""

from __future__ import annotations

import re
import urllib.parse

import psycopg
from psycopg import sql

from runkernel.adapters.stores.contract import SchemaError, StoreUnavailable
from runkernel.errors import BadStoreUrl, HostUnresolved
from runkernel.adapters.stores.redact import redacted as redacted  # the other PostgreSQL modules take it from here
from runkernel.adapters.stores.redact import masked
from runkernel.adapters.stores.sql.migrate import one_answer_statements, quiet_parent_statements
from runkernel.adapters.stores.sql.dialect import POSTGRESQL
from runkernel.adapters.stores.work import STORE_TABLES

SCHEMA_NAME = "runkernel-postgres"
SCHEMA_VERSION = 5

#: An advisory lock key that serializes ``db init`` and ``db migrate`` runs.
_SCHEMA_LOCK = 0x72756E6B  # "runk"

_TABLES = STORE_TABLES

#: What schema 2 adds (``db migrate`` runs these on a schema-1 store; a new store has
#: them in its ``_SCHEMA``): work discovery finds a quiet parent by key.
_ONE_TO_TWO = (
    # whether the Run is quiet (only Executing concurrent delegations open), and the
    # parent call a child's activation names
    "ALTER TABLE runs ADD COLUMN quiet boolean NOT NULL DEFAULT false, ADD COLUMN parent_thread_id text, "
    "ADD COLUMN parent_run_id text, ADD COLUMN parent_call_id text",
    # the children a quiet Run waits for, rewritten by each quiet commit
    "CREATE TABLE awaited_children (parent_run_id text NOT NULL, child_run_id text NOT NULL, "
    "PRIMARY KEY (parent_run_id, child_run_id))",
)

#: What schema 3 adds: each Run's trace context (OpenTelemetry), written with its
#: activation, outside the commit log; the Runs made before have none.
_TWO_TO_THREE = ("ALTER TABLE runs ADD COLUMN trace_context text",)

#: What schema 4 adds: one pending answer per wait (a resume's inbox row names the
#: ticket it answers, and no two pending rows name the same one); ``db migrate`` first
#: settles a ticket's pending answers after its oldest (``one_answer_statements``).
_THREE_TO_FOUR_COLUMN = "ALTER TABLE inbox ADD COLUMN IF NOT EXISTS ticket_id text"
_THREE_TO_FOUR_KEY = (
    "CREATE UNIQUE INDEX IF NOT EXISTS inbox_one_answer ON inbox (run_id, ticket_id) "
    "WHERE state = 'pending' AND ticket_id IS NOT NULL"
)

#: What schema 5 adds: each Run's app version beside its app (the Runs made before have
#: none: any worker of their app drives them), the worker registry (each worker's app,
#: version and last heartbeat, by the server's clock) and the versions an operator
#: recorded compatible (``accept_versions``).
_FOUR_TO_FIVE = (
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS app_version text",
    "CREATE TABLE IF NOT EXISTS workers (worker_id text PRIMARY KEY, app text, version text, "
    "heartbeat_at double precision NOT NULL)",
    "CREATE TABLE IF NOT EXISTS compatible_versions (app text NOT NULL, version text NOT NULL, drives text NOT NULL, "
    "PRIMARY KEY (app, version, drives))",
)

_SCHEMA = (
    "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE threads (thread_id text PRIMARY KEY, version bigint NOT NULL, active_run_id text)",
    # the latest snapshot, and the summary a worker's search and `runkernel runs` read;
    # ``activated`` orders Runs by their first commit
    "CREATE TABLE runs (run_id text PRIMARY KEY, thread_id text NOT NULL, snapshot text NOT NULL, app text, "
    "state text NOT NULL, step bigint NOT NULL, version bigint NOT NULL, waiting_for text, "
    "wake_at double precision, activated bigint GENERATED ALWAYS AS IDENTITY)",
    "CREATE INDEX runs_by_state ON runs (state, app)",
    "CREATE INDEX runs_by_activation ON runs (activated)",
    *_ONE_TO_TWO,
    *_TWO_TO_THREE,
    # the expected-version check is this key: a second writer of a version fails on it
    "CREATE TABLE commits (thread_id text NOT NULL, version bigint NOT NULL, run_id text NOT NULL, "
    "line text NOT NULL, writer_id text, writer_epoch bigint, PRIMARY KEY (thread_id, version))",
    "CREATE TABLE tickets (ticket_id text PRIMARY KEY, run_id text NOT NULL)",
    "CREATE TABLE closed_batches (run_id text NOT NULL, batch_id text NOT NULL, PRIMARY KEY (run_id, batch_id))",
    "CREATE TABLE applied_resumes (run_id text NOT NULL, ticket_id text NOT NULL, digest text NOT NULL, "
    "PRIMARY KEY (run_id, ticket_id))",
    "CREATE TABLE inbox (entry_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id text NOT NULL, "
    "body text NOT NULL, state text NOT NULL DEFAULT 'pending', outcome text)",
    "CREATE INDEX inbox_pending ON inbox (run_id, state)",
    _THREE_TO_FOUR_COLUMN,
    _THREE_TO_FOUR_KEY,
    # best effort, never truth: unlogged, so a checkpoint write never waits for a WAL flush
    "CREATE UNLOGGED TABLE checkpoints (run_id text PRIMARY KEY, step bigint NOT NULL, data text NOT NULL)",
    "CREATE TABLE reconciliations (entry_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "operation_id text NOT NULL, outcome text NOT NULL, note text)",
    "CREATE INDEX reconciliations_by_operation ON reconciliations (operation_id)",
    # one row per leased Run, never deleted while the Run exists (epochs only rise);
    # expires_at is the server's clock now(), in seconds since the Unix epoch
    "CREATE TABLE leases (run_id text PRIMARY KEY, worker_id text NOT NULL, epoch bigint NOT NULL, "
    "expires_at double precision NOT NULL, released boolean NOT NULL DEFAULT false)",
    *_FOUR_TO_FIVE,
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def split_url(url: str) -> tuple[str, str]:
    """(the libpq connection URL, the schema name) of a runkernel store URL: runkernel's
    own ``schema`` query parameter is taken out, everything else goes to libpq."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as error:  # an unclosed "[", a bracketed host that is no address
        raise BadStoreUrl(masked(f"{redacted(url)}: not a valid URL: {error}", url)) from None
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    rest = [(key, value) for key, value in query if key != "schema"]
    schema = schemas[-1] if schemas else "public"
    if not _IDENTIFIER.fullmatch(schema):
        raise SchemaError(f"schema={schema!r} in the store URL is not a plain SQL identifier")
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(rest)))
    if not parts.netloc and url.startswith(f"{parts.scheme}://"):
        # an empty authority (``postgresql:///?service=NAME``) is kept: urlunsplit drops its "//"
        conninfo = f"{parts.scheme}://" + urllib.parse.urlunsplit(parts._replace(scheme="", query=urllib.parse.urlencode(rest)))
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as error:
        # a URL libpq cannot parse (an unknown parameter, a bad port) is bad usage,
        # not a store that is unavailable
        raise BadStoreUrl(masked(f"{redacted(url)}: {str(error).strip().splitlines()[0]}", url)) from None
    return conninfo, schema


def unavailable(url: str, doing: str, error: BaseException) -> StoreUnavailable:
    """A one-line StoreUnavailable naming the server and what failed."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    # the server's or libpq's words may quote pieces of a malformed URL: masked too
    return StoreUnavailable(masked(f"{redacted(url)}: {doing} failed: {first}", url))


#: What libpq or the server says of a connection that can never succeed, however long a
#: worker waits: an option value libpq refuses (a port past 65535, ``sslmode=bogus``)
#: and credentials the server refuses. (A host name that does not resolve, a refused
#: connection or a server starting up may heal: those stay ``StoreUnavailable``.)
_NEVER_CONNECTS = re.compile(
    r"invalid (?:[\w ]+ )?(?:value|number)\b"
    r"|invalid connection option"
    r"|password authentication failed"
    r"|no password supplied"
    r"|role \"[^\"]*\" does not exist"
    r"|database \"[^\"]*\" does not exist"
    r"|no pg_hba\.conf entry"
    r"|Servname not supported"  # the port is no service (a negative one, a URL split elsewhere)
)

#: A host name that does not resolve (psycopg's resolver, or libpq's words).
_UNRESOLVED = re.compile(r"failed to resolve host '([^']*)'|could not translate host name \"([^\"]*)\"")


def connect_failure(url: str, doing: str, error: BaseException) -> StoreUnavailable | BadStoreUrl:
    """What a failed connection attempt is: ``BadStoreUrl`` (a usage error: exit 2, and
    a worker stops at once) when the URL can never connect (an option libpq refuses,
    credentials the server refuses), ``HostUnresolved`` for a host name that does not
    resolve (yet), else ``StoreUnavailable`` (``unavailable``)."""
    found = unavailable(url, doing, error)
    if _NEVER_CONNECTS.search(str(error)):
        return BadStoreUrl(str(found))
    unresolved = _UNRESOLVED.search(str(error))
    if unresolved:
        host = masked(unresolved.group(1) or unresolved.group(2) or "", url)
        return HostUnresolved(host, str(found))
    return found


#: The tables of the store's schema (one parameter: the schema's name).
TABLES_QUERY = "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"


def meta_query(schema: str) -> sql.Composed:
    """The rows of the schema's ``meta`` table: (key, value)."""
    return sql.SQL("SELECT key, value FROM {}.meta").format(sql.Identifier(schema))


def holds_store(url: str, schema: str, tables: set[str]) -> bool:
    """Whether a schema of ``tables`` holds a runkernel store (its ``meta`` is to be
    read next); a schema holding another application's tables is refused."""
    if "meta" not in tables:
        if tables:
            raise SchemaError(
                f"{redacted(url)}: schema {schema!r} holds {', '.join(sorted(tables)[:5])} but is not a runkernel store"
            )
        return False
    return True


def meta_version(url: str, schema: str, found: dict[str, str]) -> int:
    """The layout version a store's ``meta`` rows name."""
    if found.get("schema") != SCHEMA_NAME:
        raise SchemaError(f"{redacted(url)}: schema {schema!r} is a {found.get('schema')!r} database, not a runkernel store")
    try:
        return int(found.get("version", ""))
    except ValueError:
        raise SchemaError(f"{redacted(url)}: unreadable schema version {found.get('version')!r}") from None


def found_version(conn: psycopg.Connection[tuple[object, ...]], url: str, schema: str) -> int | None:
    """The layout version the schema holds, None when it holds no runkernel store; a
    schema holding another application's tables is refused. Reads only."""
    rows = conn.execute(TABLES_QUERY, (schema,)).fetchall()
    if not holds_store(url, schema, {str(r[0]) for r in rows}):
        return None
    return meta_version(url, schema, {str(k): str(v) for k, v in conn.execute(meta_query(schema))})


def check_current(conn: psycopg.Connection[tuple[object, ...]], url: str, schema: str) -> None:
    """Refuse, with one line naming the command to run, anything but a store of this
    runkernel's schema version."""
    refuse_unless_current(url, schema, found_version(conn, url, schema))


def refuse_unless_current(url: str, schema: str, version: int | None) -> None:
    """``check_current`` once the version is read (None: no store in the schema)."""
    if version is None:
        raise SchemaError(
            f"{redacted(url)} holds no runkernel store in schema {schema!r}; run `runkernel db init --store URL`"
        )
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{redacted(url)} has schema version {version}; this runkernel knows up to {SCHEMA_VERSION}: upgrade runkernel"
        )
    if version < SCHEMA_VERSION:
        raise SchemaError(f"{redacted(url)} has the older schema version {version}; run `runkernel db migrate --store URL`")


def _connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    conninfo, _ = split_url(url)
    try:
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    except psycopg.Error as error:
        raise connect_failure(url, "connecting", error) from None


def init_postgres(url: str) -> bool:
    """``runkernel db init``: create the store's schema (and its namespace) in one
    transaction; True if created, False if the store was already there. A store of
    another version is refused (``db migrate`` upgrades it)."""
    _, schema = split_url(url)
    with _connect(url) as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                version = found_version(conn, url, schema)
                if version is not None:
                    check_current(conn, url, schema)
                    return False
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
                conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
                for statement in _SCHEMA:
                    conn.execute(statement.encode())
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', %s), ('version', %s)",
                    (SCHEMA_NAME, str(SCHEMA_VERSION)),
                )
                return True
        except psycopg.Error as error:
            raise unavailable(url, "creating the schema", error) from None


def migrate_postgres(url: str) -> tuple[int, int]:
    """``runkernel db migrate``: (version before, version after), in one transaction (a
    crash leaves the old schema or the new one). Schema 2 adds what finds a quiet parent
    by key (each Run's quiet flag and parent call, the children a quiet Run waits for),
    filled from the latest states and activations; schema 3 each Run's trace context;
    schema 4 one pending answer per wait (later answers of a ticket settled first);
    schema 5 each Run's app version, the worker registry and the versions recorded
    compatible; a current store is left alone, an
    uninitialized one is refused naming ``db init``, a newer one naming an upgrade."""
    _, schema = split_url(url)
    with _connect(url) as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                version = found_version(conn, url, schema)
                if version not in (1, 2, 3, 4):
                    check_current(conn, url, schema)
                    return SCHEMA_VERSION, SCHEMA_VERSION
                conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
                if version == 1:
                    _one_to_two(conn, url)
                if version <= 2:
                    for statement in _TWO_TO_THREE:
                        conn.execute(statement.encode())
                if version <= 3:
                    _three_to_four(conn)
                for statement in _FOUR_TO_FIVE:
                    conn.execute(statement.encode())
                conn.execute("UPDATE meta SET value = %s WHERE key = 'version'", (str(SCHEMA_VERSION),))
                return version, SCHEMA_VERSION
        except psycopg.Error as error:
            raise unavailable(url, "the migration", error) from None


def _three_to_four(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    conn.execute(_THREE_TO_FOUR_COLUMN.encode())
    pending = conn.execute(
        "SELECT entry_id, run_id, body FROM inbox WHERE state = 'pending' ORDER BY entry_id"
    ).fetchall()
    for statement, params in list(one_answer_statements(pending)):
        conn.execute(POSTGRESQL.sql(statement).encode(), params)
    conn.execute(_THREE_TO_FOUR_KEY.encode())


def _one_to_two(conn: psycopg.Connection[tuple[object, ...]], url: str) -> None:
    for statement in _ONE_TO_TWO:
        conn.execute(statement.encode())
    runs = conn.execute("SELECT run_id, snapshot FROM runs").fetchall()
    # only an activation names a parent: the lines that cannot are not read
    lines = conn.execute("SELECT run_id, line FROM commits WHERE strpos(line, '\"parent\"') > 0").fetchall()
    for statement, params in quiet_parent_statements(redacted(url), runs, lines):
        conn.execute(POSTGRESQL.sql(statement).encode(), params)


def drop_store(url: str) -> None:
    """Drop the store's namespace and everything in it (tests clean up with this; the
    ``public`` schema is refused, it is never runkernel's to drop)."""
    _, schema = split_url(url)
    if schema == "public":
        raise SchemaError("refusing to drop the public schema")
    with _connect(url) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


TABLES = _TABLES
