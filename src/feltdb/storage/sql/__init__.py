"""The hand-written SQL of the storage backends, one directory per dialect.

Each dialect directory holds ``queries.sql`` (every statement the backend runs, as named
blocks)::

    -- name: get_row
    -- description: one row by key
    SELECT ...;

and its schema: ``migrations/NNNN_<what>.sql``, numbered steps applied in order, each once,
that take a store of schema ``NNNN - 1`` to schema ``NNNN``. PostgreSQL's start at 1, from an
empty database. SQLite's start at 2: a new SQLite store gets the newest schema whole from
``schema.sql``, and the steps upgrade a file an older release wrote.

Backends load these once, at import, and pick statements by name: runtime code never
builds SQL, so every statement that can run is in these files, where it can be read and
its query plan checked. The one thing filled in at load is the list of a row's index
columns, written ``/*index_columns*/`` and the like, from the fields of ``RowIndex``
(:mod:`feltdb.storage.index_columns`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import LiteralString

from feltdb.storage.index_columns import expand

_NAME = re.compile(r"--\s*name:\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*$")
_DESCRIPTION = re.compile(r"--\s*description:\s*(?P<text>\S.*)$")
_DIALECT = re.compile(r"[a-z][a-z0-9_]*")
_MIGRATION = re.compile(r"(?P<version>[0-9]{4})_(?P<name>[a-z0-9_]+)\.sql")


def _read(dialect: str, filename: str) -> str:
    if not _DIALECT.fullmatch(dialect):
        raise ValueError(f"not a SQL dialect name: {dialect!r}")
    resource = resources.files(__name__).joinpath(dialect, filename)
    try:
        return resource.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise ValueError(f"no {filename} for SQL dialect {dialect!r}") from error


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split the text of a ``queries.sql`` file into ``{name: statement}``.

    Lines before the first ``-- name:`` are the file's preamble and are ignored. Each
    block must have a ``-- description:`` line and a non-empty statement; names are unique.

    Raises:
        ValueError: a block without a description or statement, or a repeated name.
    """
    queries: dict[str, LiteralString] = {}
    name: str | None = None
    described = False
    body: list[str] = []

    def finish() -> None:
        if name is None:
            return
        statement = "\n".join(body).strip()
        if not described:
            raise ValueError(f"query {name!r} has no '-- description:' line")
        if not statement:
            raise ValueError(f"query {name!r} has no statement")
        # The files are part of the package, not input: their text is as literal as a
        # string in the source would be. (mypy reads LiteralString as str, so no cast.)
        queries[name] = statement

    for line in text.splitlines():
        header = _NAME.fullmatch(line.strip())
        if header is not None:
            finish()
            name = header["name"]
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice")
            described = False
            body = []
        elif (
            name is not None and not described and not body and _DESCRIPTION.fullmatch(line.strip())
        ):
            described = True
        elif name is not None:
            body.append(line.rstrip())
    finish()
    return queries


def load_queries(dialect: str) -> dict[str, LiteralString]:
    """The named statements of a dialect's ``queries.sql``, as ``{name: statement}``, each
    index-column marker written out (:func:`feltdb.storage.index_columns.expand`).

    Raises:
        ValueError: no such dialect, or a malformed file (see :func:`parse_queries`).
    """
    parsed = parse_queries(_read(dialect, "queries.sql"))
    # Expanded from RowIndex's own field names, never from input: still package text (and
    # mypy reads LiteralString as str, as parse_queries says, so no cast).
    return {name: expand(text, dialect) for name, text in parsed.items()}


def load_schema(dialect: str) -> LiteralString:
    """The text of a dialect's ``schema.sql``: the statements that create a new store.

    Raises:
        ValueError: no such dialect.
    """
    return _read(dialect, "schema.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered step of a dialect's schema: ``migrations/NNNN_<name>.sql``."""

    version: int
    name: str
    script: LiteralString
    """The statements of the step, run as one script inside the migrating transaction."""


def load_migrations(dialect: str, *, first: int = 1) -> list[Migration]:
    """The numbered migrations of a dialect, in order: versions ``first``, ``first + 1``, …
    without a gap (PostgreSQL's start at 1, SQLite's at 2).

    Files of the ``migrations`` directory that are not named ``NNNN_<name>.sql`` (lowercase
    letters, digits and underscores) are refused rather than skipped, so that a misnamed
    step cannot be silently left out.

    Raises:
        ValueError: no such dialect or no migrations, a misnamed file, a repeated or
            missing version, or an empty script.
    """
    if not _DIALECT.fullmatch(dialect):
        raise ValueError(f"not a SQL dialect name: {dialect!r}")
    directory = resources.files(__name__).joinpath(dialect, "migrations")
    if not directory.is_dir():
        raise ValueError(f"no migrations for SQL dialect {dialect!r}")
    migrations: list[Migration] = []
    for entry in sorted(directory.iterdir(), key=lambda entry: entry.name):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        match = _MIGRATION.fullmatch(entry.name)
        if match is None:
            raise ValueError(f"{dialect} migration {entry.name!r} is not named NNNN_<name>.sql")
        # Package files, not input: as literal as a string in the source (see above).
        script: LiteralString = entry.read_text(encoding="utf-8")
        if not script.strip():
            raise ValueError(f"{dialect} migration {entry.name!r} is empty")
        migrations.append(Migration(int(match["version"]), match["name"], script))
    if not migrations:
        raise ValueError(f"no migrations for SQL dialect {dialect!r}")
    for expected, migration in enumerate(migrations, start=first):
        if migration.version != expected:
            raise ValueError(
                f"{dialect} migrations must be numbered {first}, {first + 1}, … without a gap "
                f"or a repeat: found {migration.version:04d}_{migration.name}.sql where "
                f"{expected:04d} was expected"
            )
    return migrations
