"""Fixtures shared by every kind of test.

Backends: a test that takes ``backend`` (or ``new_target``) runs once on SQLite and once on
PostgreSQL. The PostgreSQL server is the one ``FELTDB_TEST_PG`` names (``make test`` starts
a throwaway cluster through ``scripts/with-postgres``); each test gets its own database,
cloned from a template that already holds the schema, and dropped when the test ends.
Every test that touches PostgreSQL is marked ``postgres``, so ``-m "not postgres"`` (``make
test-sqlite``) runs the rest without a server.

``make test`` runs the tests in two pytest-xdist worker processes: the first uses the server
of ``FELTDB_TEST_PG``, every further one a throwaway cluster of its own (``pg_admin_url``),
so each worker's tests still fit in one server's default ``max_connections`` and what a
test counts or terminates in ``pg_stat_activity`` is its own worker's alone.
"""

from __future__ import annotations

import itertools
import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from support.ci import ON_CI
from support.pg_cluster import ENV_SETTINGS, ClusterError, PostgresCluster, find_bin_dir
from xdist.scheduler import LoadFileScheduling

import feltdb

PG_ADMIN_URL = os.environ.get("FELTDB_TEST_PG") or None
"""Read once at import: the autouse fixture below removes FELTDB_* from every test's
environment, this variable included.
"""
PG_SETTINGS = os.environ.get(ENV_SETTINGS)
"""The extra server settings (``FELTDB_PG_SETTINGS``) of ``FELTDB_TEST_PG``'s cluster, for
a worker's own cluster; read at import for the same reason."""
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
"""This process's pytest-xdist worker (``gw0``, ``gw1``...), or "" when pytest runs alone."""


BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(autouse=True)
def clean_feltdb_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees FELTDB_* settings from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("FELTDB_"):
            monkeypatch.delenv(name)
    yield


# --- PostgreSQL --------------------------------------------------------------------------


def with_database(url: str, database: str) -> str:
    """``url`` pointing at ``database`` instead (the query, e.g. a socket ``host``, kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


class PgDatabases:
    """Creates and drops the tests' databases on the server at ``admin_url``.

    Each database is cloned from a template that already holds feltdb's schema (made once
    per session by opening a store on it), so a test pays for a file copy, not for the
    migrations. Without the template (no backend yet, or it failed), databases are empty.
    """

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.prefix = f"feltdb_{uuid.uuid4().hex[:8]}"
        self.numbers = itertools.count(1)
        self.template: str | None = None
        self.template_error: str | None = None

    def execute(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            connection.execute(statement)

    def url_of(self, database: str) -> str:
        return with_database(self.admin_url, database)

    def make_template(self) -> None:
        name = f"{self.prefix}_template"
        self.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            feltdb.open_database(self.url_of(name)).close()
        except Exception as error:  # no backend yet, or it could not apply its schema
            self.template_error = f"{type(error).__name__}: {error}"
            self.drop(name)
            return
        self.template = name

    def create(self, label: str, *, bare: bool = False) -> str:
        """A new database (its name says which test ``label`` it is); returns the name."""
        safe = re.sub(r"[^a-z0-9_]+", "_", label.lower())[:32]
        name = f"{self.prefix}_{next(self.numbers)}_{safe}"
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if self.template is not None and not bare:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(self.template))
        self.execute(statement)
        return name

    def drop(self, name: str) -> None:
        self.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


_databases: PgDatabases | None = None
"""The session's :class:`PgDatabases`, for the summary line."""


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A superuser URL of the test server (``FELTDB_TEST_PG``); skipped without one, but
    failed on CI, where nothing may be skipped. A pytest-xdist worker but the first gets a
    throwaway cluster of its own instead (started here, stopped when the worker ends), when
    the server binaries are there (``FELTDB_TEST_PG`` may name a server elsewhere).
    """
    if PG_ADMIN_URL is None:
        message = "PostgreSQL tests need FELTDB_TEST_PG (make test starts a server)"
        if ON_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    bin_dir = find_bin_dir()
    if XDIST_WORKER in ("", "gw0") or bin_dir is None:
        yield PG_ADMIN_URL
        return
    cluster = PostgresCluster(bin_dir)
    with pytest.MonkeyPatch.context() as patch:
        if PG_SETTINGS is not None:
            patch.setenv(ENV_SETTINGS, PG_SETTINGS)
        try:
            url = cluster.start()
        except ClusterError as error:
            pytest.fail(f"worker {XDIST_WORKER}'s own cluster did not start: {error}")
    try:
        yield url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_databases(pg_admin_url: str) -> Iterator[PgDatabases]:
    global _databases
    databases = _databases = PgDatabases(pg_admin_url)
    databases.make_template()
    yield databases
    if databases.template is not None:
        databases.drop(databases.template)


@pytest.fixture
def new_pg_url(
    pg_databases: PgDatabases, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """``new_pg_url(name="db", *, bare=False)``: the URL of a fresh database of this test,
    the same for the same ``name``, dropped when the test ends. It holds feltdb's schema
    and no rows; ``bare=True`` makes one without the schema (to test migrations).
    """
    made: dict[str, str] = {}

    def new(name: str = "db", *, bare: bool = False) -> str:
        if name not in made:
            made[name] = pg_databases.create(f"{request.node.name}_{name}", bare=bare)
        return pg_databases.url_of(made[name])

    yield new
    for database in made.values():
        pg_databases.drop(database)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of this run of the test: ``"sqlite"`` or ``"postgres"``."""
    if request.param == "postgres":
        request.getfixturevalue("pg_admin_url")
    name: str = request.param
    return name


@pytest.fixture
def new_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``new_target(name="work")``: where a new store of this test's backend lives, the
    same for the same ``name``: a file in ``tmp_path``, or a fresh PostgreSQL database.
    """
    if backend == "postgres":
        new_pg_url: Callable[..., str] = request.getfixturevalue("new_pg_url")

        def pg_target(name: str = "work") -> str:
            return new_pg_url(name)

        return pg_target

    def sqlite_target(name: str = "work") -> str:
        return str(tmp_path / f"{name}.db")

    return sqlite_target


POSTGRES_FIXTURES = frozenset({"pg_admin_url", "pg_databases", "new_pg_url"})


def uses_postgres(item: pytest.Item) -> bool:
    """Whether ``item`` runs on the postgres backend or requests a PostgreSQL fixture (as
    an argument of the test or of a fixture it uses; ``request.getfixturevalue`` is not
    seen, so a fixture that needs the server names it as an argument).
    """
    callspec = getattr(item, "callspec", None)
    on_postgres = callspec is not None and callspec.params.get("backend") == "postgres"
    return on_postgres or not POSTGRES_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if uses_postgres(item):
            item.add_marker(pytest.mark.postgres)


# --- pytest-xdist ------------------------------------------------------------------------


SHARES_SERVERS = re.compile(r"^from support\.server_fixtures import .*\bserver\b", re.MULTILINE)
"""A conftest line that shares ``support.server_fixtures``' servers with its package."""


class FilesAndServerPackages(LoadFileScheduling):
    """``--dist loadfile`` (what ``make test`` uses), but a package whose conftest shares
    one server per backend among its tests (``support.server_fixtures``) goes to one worker
    whole, so its servers start once per backend, as when pytest runs alone, instead of once
    per file and worker.
    """

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self.server_packages = tuple(
            f"{conftest.parent.relative_to(config.rootpath).as_posix()}/"
            for conftest in sorted((config.rootpath / "tests").rglob("conftest.py"))
            if SHARES_SERVERS.search(conftest.read_text(encoding="utf-8"))
        )

    def _split_scope(self, nodeid: str) -> str:
        for package in self.server_packages:
            if nodeid.startswith(package):
                return package
        return super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getoption("dist") == "loadfile":
        return FilesAndServerPackages(config, log)
    return None


def pytest_report_header() -> str:
    if PG_ADMIN_URL is None:
        return "postgres: FELTDB_TEST_PG is not set (postgres tests " + (
            "fail: CI is set)" if ON_CI else "skip)"
        )
    return f"postgres: {PG_ADMIN_URL}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _databases is None:
        return
    if _databases.template is not None:
        terminalreporter.write_line(
            f"postgres: test databases cloned from {_databases.template} (schema applied once)"
        )
    else:
        terminalreporter.write_line(
            f"postgres: no template ({_databases.template_error}); test databases were empty"
        )
