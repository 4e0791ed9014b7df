"""Opening a SQLite file as a runkernel store, without touching a file runkernel does not own.

The file is recognized before any write or pragma: a path that is missing, a directory,
a FIFO or a device, a file that is not SQLite, an empty database (for a read) or another
application's database is refused with one typed error, and the file is left exactly as
it was (its journal mode included). Read access opens the file with ``mode=ro``; where
SQLite cannot create the WAL index beside the file (a read-only directory or mount) it
opens it ``immutable=1`` instead, which is only safe when no write-ahead log is waiting
to be checkpointed, so a non-empty ``-wal`` file there is refused rather than ignored.
"""

from __future__ import annotations

import enum
import os
import secrets
import sqlite3
import stat
import urllib.parse

from attrs import frozen

from runkernel.adapters.stores.contract import DamagedStore, SchemaError, StoreUnavailable
from runkernel.errors import BadStoreUrl

#: How a SQLite store's URL starts: ``sqlite:///rel.db`` is relative to the working
#: directory, ``sqlite:////abs/path.db`` absolute.
URL_PREFIX = "sqlite:///"


def path_of(url: str) -> str:
    """The file a ``sqlite:///path.db`` URL names."""
    path = url[len(URL_PREFIX):]
    if not path:
        raise BadStoreUrl(f"{url!r} names no file; use sqlite:///path.db")
    if "?" in path:
        # SQLite's own URI parameters (mode=, cache=...) would be a file name here: the
        # store opens its file with the modes each command needs, so a query is refused
        query = path[path.index("?"):]
        raise BadStoreUrl(f"{url!r}: a SQLite store URL takes no query ({query!r}); use sqlite:///path.db")
    return path


#: SQLite's primary result codes this module tells apart (``sqlite_errorcode & 0xff``).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


class Access(enum.Enum):
    """What the caller will do with the store."""

    READ = "read"  # read commands: mode=ro, never a schema, never a pragma that writes
    WRITE = "write"  # the store must exist and be a runkernel store
    CREATE = "create"  # as WRITE, but a missing file or an empty database gets the schema


class Recognized(enum.Enum):
    """What an opened database holds."""

    EMPTY = "empty"  # no schema object at all: only CREATE may put the schema there
    CURRENT = "current"  # a runkernel store of the schema this version writes
    OLDER = "older"  # a runkernel store of an older schema (only when a migration asks)


@frozen
class Layout:
    """The schema a runkernel SQLite store must carry (given by the store module)."""

    name: str
    version: int
    tables: tuple[str, ...]


def store_error(path: str, doing: str, error: sqlite3.Error) -> Exception:
    """The typed store error for a SQLite failure, as one line naming the file."""
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    if code == _SQLITE_NOTADB:
        return SchemaError(f"{path} is not a runkernel SQLite store: {error}")
    if code == _SQLITE_CORRUPT:
        return DamagedStore(f"{path}: the store is damaged ({doing}): {error}")
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return StoreUnavailable(f"{path} is locked by another writer ({doing}): {error}")
    if code == _SQLITE_FULL:
        return StoreUnavailable(f"{path}: the disk is full ({doing}): {error}")
    if code in (_SQLITE_READONLY, _SQLITE_CANTOPEN) and _on_read_only_media(path):
        return StoreUnavailable(f"{path} is on a read-only file system ({doing}): {error}")
    if code == _SQLITE_READONLY:
        return StoreUnavailable(f"{path} is read-only ({doing}): {error}")
    return StoreUnavailable(f"{path}: {doing} failed: {error}")


def _on_read_only_media(path: str) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(os.path.abspath(path))).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_path(path: str, access: Access) -> bool:
    """Refuse what cannot be a store file before SQLite opens it (opening a FIFO would
    block, a directory is never a store). Returns whether the file exists."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if access is not Access.CREATE:
            raise SchemaError(f"no store at {path}") from None
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreUnavailable(f"cannot create {path}: {parent} is not a directory") from None
        return False
    except OSError as error:
        raise StoreUnavailable(f"cannot open {path}: {error.strerror or error}") from None
    if stat.S_ISDIR(info.st_mode):
        raise SchemaError(f"{path} is a directory, not a runkernel store file")
    if not stat.S_ISREG(info.st_mode):
        raise SchemaError(f"{path} is not a regular file, so not a runkernel store")
    if info.st_size == 0:
        # even for a command that creates stores: a file someone made is not ours to fill
        raise SchemaError(f"{path} is an empty file, not a runkernel store")
    # The header is SQLite's to read (``not_a_database``): closing any descriptor of the
    # file in this process, as reading it here would, drops every POSIX lock this
    # process's connections hold on it, and another process may then checkpoint and
    # delete the write-ahead log under them (sqlite.org/howtocorrupt.html, 2.2).
    return True


def _place_new_database(path: str) -> None:
    """Put a new, empty SQLite database at ``path`` in one step: made under a scratch
    name beside it (its header written) and hard-linked into place, so no process ever
    finds the store's file empty, which ``check_path`` refuses as someone else's file.
    The scratch file is created with the mode SQLite gives a new file (0666 less the
    umask). A creator that loses the race to another leaves the other's file alone;
    where the directory refuses the scratch file or hard links, SQLite creates the file
    instead."""
    directory = os.path.dirname(os.path.abspath(path))
    scratch = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(8)}.new")
    try:
        os.close(os.open(scratch, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except OSError:
        return
    try:
        db = sqlite3.connect(scratch, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # writes the header; the store runs in WAL
        finally:
            db.close()
        os.link(scratch, path)
    except (OSError, sqlite3.Error):
        pass  # FileExistsError: another process created the store first; its file stands
    finally:
        for leftover in (scratch, scratch + "-wal", scratch + "-shm"):
            try:
                os.unlink(leftover)
            except OSError:
                pass  # gone already, or not ours to remove: nothing to undo


def not_a_database(path: str, error: sqlite3.Error) -> SchemaError | None:
    """SQLite's refusal of a file whose header is not a SQLite database's, as one line."""
    if isinstance(error, sqlite3.DatabaseError) and "file is not a database" in str(error):
        return SchemaError(f"{path} is not a runkernel SQLite store: it is not a SQLite database")
    return None


def _uri(path: str, **parameters: str) -> str:
    query = urllib.parse.urlencode(parameters)
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{query}"


def connect(
    path: str, access: Access, layout: Layout, *, timeout: float, allow_older: bool = False
) -> tuple[sqlite3.Connection, Recognized]:
    """An open connection to a recognized store, in autocommit mode.

    READ connections are opened read-only and left inside one read transaction, so
    everything a read command shows comes from one snapshot of the store. With
    ``allow_older`` (``runkernel db migrate``) a WRITE connection also accepts an older
    runkernel schema and says so (``Recognized.OLDER``)."""
    if not check_path(path, access) and access is Access.CREATE:
        _place_new_database(path)
    if access is Access.READ:
        return _connect_read(path, layout, timeout=timeout), Recognized.CURRENT
    mode = "rwc" if access is Access.CREATE else "rw"
    try:
        db = sqlite3.connect(_uri(path, mode=mode), uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
    except sqlite3.Error as error:
        raise store_error(path, "opening", error) from None
    try:
        found = recognize(db, path, layout, allow_older=allow_older)
        if found is Recognized.EMPTY and access is not Access.CREATE:
            raise SchemaError(f"{path} holds no runkernel store (an empty database)")
    except sqlite3.Error as error:
        db.close()
        raise not_a_database(path, error) or store_error(path, "recognizing the schema", error) from None
    except BaseException:
        db.close()
        raise
    return db, found


def _connect_read(path: str, layout: Layout, *, timeout: float) -> sqlite3.Connection:
    try:
        if not os.path.exists(path + "-wal"):
            # nobody has the store open in WAL mode: recognize it without the WAL index
            # first, so a refused file (a newer schema, another application's) is left
            # without the -wal and -shm files a WAL reader creates beside it
            probe = sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
            try:
                _begin_recognized(probe, path, layout)
            finally:
                probe.close()
        db = sqlite3.connect(_uri(path, mode="ro"), uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
        try:
            return _begin_recognized(db, path, layout)
        except sqlite3.OperationalError as error:
            db.close()
            if getattr(error, "sqlite_errorcode", 0) & 0xFF not in (_SQLITE_CANTOPEN, _SQLITE_READONLY):
                raise
        # read-only media: SQLite cannot create the WAL index, so read the file as
        # immutable; that ignores a write-ahead log, so one must not be waiting
        wal = path + "-wal"
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            raise StoreUnavailable(
                f"{path} is on read-only media with an uncheckpointed write-ahead log; "
                "it cannot be read consistently there"
            )
        db = sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
        try:
            return _begin_recognized(db, path, layout)
        except BaseException:
            db.close()
            raise
    except sqlite3.Error as error:
        raise not_a_database(path, error) or store_error(path, "reading", error) from None


def _begin_recognized(db: sqlite3.Connection, path: str, layout: Layout) -> sqlite3.Connection:
    db.execute("BEGIN")
    try:
        found = recognize(db, path, layout)
    except BaseException:
        db.close()
        raise
    if found is Recognized.EMPTY:
        db.close()
        raise SchemaError(f"{path} holds no runkernel store (an empty database)")
    return db


def statements(script: str) -> list[str]:
    """A SQL script as single statements, to run inside one transaction (``executescript``
    would commit first). Split where SQLite says a statement is complete, so a trigger's
    body with its own semicolons stays whole."""
    found, pending = [], ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n\t;"):
                found.append(pending.strip())
            pending = ""
    if pending.strip(" \n\t;"):
        found.append(pending.strip())
    return found


def recognize(db: sqlite3.Connection, path: str, layout: Layout, *, allow_older: bool = False) -> Recognized:
    """Read (never write) what the database holds; refuse anything but a runkernel store
    of this schema or a database with no schema object at all. With ``allow_older`` (for
    a migration) a runkernel store of an older schema is ``Recognized.OLDER``."""
    objects = {
        (str(kind), str(name))
        for kind, name in db.execute("SELECT type, name FROM sqlite_master")
        if not str(name).startswith("sqlite_")
    }
    if not objects:
        return Recognized.EMPTY
    tables = {name for kind, name in objects if kind == "table"}
    if "meta" not in tables:
        names = sorted(name for _, name in objects)
        raise SchemaError(f"{path} holds {', '.join(names[:5])} but is not a runkernel store")
    try:
        found = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta").fetchall()}
    except sqlite3.OperationalError as error:
        raise SchemaError(f"{path} has a meta table runkernel cannot read: {error}") from None
    if found.get("schema") != layout.name:
        raise SchemaError(f"{path} is a {found.get('schema')!r} database, not a runkernel store")
    try:
        version = int(found.get("version", ""))
    except ValueError:
        raise DamagedStore(f"{path} has an unreadable schema version {found.get('version')!r}") from None
    if version > layout.version:
        raise SchemaError(
            f"{path} has schema version {version}; this runkernel knows up to "
            f"{layout.version}: upgrade runkernel"
        )
    if version < layout.version:
        if allow_older:
            return Recognized.OLDER
        raise SchemaError(f"{path} has the older schema version {version}; run `runkernel db migrate`")
    missing = sorted(set(layout.tables) - tables)
    if missing:
        raise DamagedStore(f"{path}: the store is damaged: tables {missing} are missing")
    return Recognized.CURRENT
