"""Where an operator command sends its calls: the six target options, declared once, and
the :class:`~feltdb.client.WorkloadClient` they open.

``--url``/``--token`` open a :class:`~feltdb.client.Client` of a server (who you are is
the token's grant). ``--db`` opens the store itself and a
:class:`~feltdb.client.LocalClient` acting as a local operator: ``--as`` (``human:$USER``
by default) in ``--tenant``'s ``--application``. A command that records its grant (a
submission keeps it, a decision names it) signs a five-minute one with the keyring a
server on that store uses, and says which (:mod:`feltdb.cli.keyrings`: never one made
where nobody asked for it); no other command opens a keyring.

A command takes the options by declaring ``target: Target`` and being decorated with
:func:`targeted`, which adds the six options to its signature.
"""

from __future__ import annotations

import builtins
import functools
import getpass
import inspect
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from feltdb.cli.parsing import subject_option
from feltdb.errors import WorkloadError

if TYPE_CHECKING:
    from feltdb.auth import Keyring, SignedGrant, Subject
    from feltdb.auth.scope import Scope
    from feltdb.client.local import LocalClient
    from feltdb.client.protocol import Page, WorkloadClient
    from feltdb.records.summary import WorkloadSummary

# What a command runs (the store, the clients, the auth records) is imported where it runs:
# none of it is needed to declare the commands, and `feltdb --help` imports only typer.

OPERATOR_GRANT_LIFETIME_S = 300
"""How long the grant of a ``--db`` operator lasts: one command's worth (five minutes)."""

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (records as the API answers them), only.")
]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Act on this store directly (a SQLite file or a URL) as a local operator, "
        "instead of through a server. Takes precedence over --url.",
    ),
]

_OPTIONS: dict[str, Any] = {
    "url": Annotated[
        str | None,
        typer.Option(
            "--url", envvar="FELTDB_URL", help="The feltdb server, e.g. http://127.0.0.1:8700."
        ),
    ],
    "token": Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="FELTDB_TOKEN",
            help="The bearer token to call the server with (its grant is who you are).",
            show_default=False,
        ),
    ],
    "db": DbOption,
    "tenant": Annotated[
        str, typer.Option(envvar="FELTDB_TENANT", help="With --db: the tenant to act in.")
    ],
    "application": Annotated[
        str,
        typer.Option(envvar="FELTDB_APPLICATION", help="With --db: the application to act in."),
    ],
    "as_": Annotated[
        str | None,
        typer.Option(
            "--as",
            envvar="FELTDB_SUBJECT",
            help="With --db: who the local operator acts as, KIND:ID (default human:$USER). "
            "Whoever can open the store may name anyone: a server takes who you are from "
            "the token instead.",
            show_default=False,
        ),
    ],
}
"""The six target options, by parameter name."""


@dataclass(frozen=True)
class Target:
    """The six target options of one command line."""

    url: str | None = None
    token: str | None = None
    db: str | None = None
    tenant: str = "default"
    application: str = "default"
    as_: str | None = None


_DEFAULTS = Target()


def typed(context: typer.Context, name: str) -> bool:
    """Whether option ``name`` of ``context``'s command was typed on the command line (not
    taken from the environment or its default).
    """
    source = context.get_parameter_source(name)
    # By the source's name: typer vendors click, and its ParameterSource is not public.
    return source is not None and source.name == "COMMANDLINE"


def typed_options(context: typer.Context) -> frozenset[str]:
    """The target options typed on the command line of ``context``'s command."""
    return frozenset(name for name in _OPTIONS if typed(context, name))


def within(group: Target, command: Target, typed_after: Collection[str]) -> Target:
    """The target of a subcommand of a group that takes the target options too (``feltdb
    audit --db X verify``): the options ``typed_after`` the subcommand win, and the group's
    (typed, from the environment, or defaults) fill in the rest. Where to act is one
    choice: ``--db`` after the subcommand drops the group's server, ``--url`` its store.
    """
    given = {name: getattr(command, name) for name in typed_after}
    if "db" in given:
        given.setdefault("url", None)
        given.setdefault("token", None)
    if "url" in given:
        given.setdefault("db", None)
    return replace(group, **given)


def targeted(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (which takes ``target: Target``) with the six target options in its
    signature instead, last, so that typer declares them; they reach it as one
    :class:`Target`.
    """
    signature = inspect.signature(command, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "target"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=getattr(_DEFAULTS, name),
                          annotation=annotation)
        for name, annotation in _OPTIONS.items()
    ]  # fmt: skip

    @functools.wraps(command)
    def run(**options: Any) -> None:
        target = Target(**{name: options.pop(name) for name in _OPTIONS})
        command(**options, target=target)

    run.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in [*kept, *added]} | {"return": None}
    return run


# ------------------------------------------------------------------ refusals


def usage_error(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; the exit (2) of a usage error, to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def refusal_line(error: WorkloadError) -> str:
    """The one line a refusal is said in: its code and message; a server that cannot be
    reached is said as such (its code, a storage failure, would send an operator looking
    at the wrong thing).
    """
    if error.details and error.details.get("unreachable"):
        return f"error: {error.message}"
    return f"error {error.code}: {error.message}"


@contextmanager
def refusals() -> Iterator[None]:
    """Turn the refusals an operator is expected to meet into exit 1 with the code on
    stderr: a store's or server's refusal, an unreachable server, an unreadable keyring.
    A broken pipe is no refusal: it passes, for :func:`feltdb.cli.application.main`.
    """
    try:
        yield
    except WorkloadError as error:
        typer.echo(refusal_line(error), err=True)
        raise typer.Exit(1) from None
    except BrokenPipeError:
        # Stdout's reader went away (`feltdb audit | head -1`): nothing to tell anyone.
        raise
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        typer.echo(f"error: cannot use{where}: {error.strerror or error}", err=True)
        raise typer.Exit(1) from None


# ------------------------------------------------------------------ opening a client


@contextmanager
def connected(
    target: Target,
    *,
    create: bool = False,
    needs: Iterable[str] = (),
    records: bool = False,
    keyring: Path | None = None,
) -> Iterator[WorkloadClient]:
    """The client ``target`` names, closed on exit (and the store it opened), with
    refusals turned into exit 1. ``needs`` is what the command does (capabilities): with
    ``--db``, the operator's grant holds only these, and is signed only when the command
    ``records`` it, with the keyring :func:`~feltdb.cli.keyrings.choose_keyring` finds
    (``keyring``: the command's ``--keyring``), named on stderr. A SQLite store file that
    does not exist is created only with ``create`` (by the commands that add work): for
    the others a mistyped path is an error, not an empty store.

    Raises:
        typer.Exit: (2, after saying why) no target, ``--url`` without ``--token``, a URL
            that is not one, no store file at ``--db`` without ``create``, or no keyring
            for a command that ``records`` and may not make one.
    """
    with refusals(), ExitStack() as stack:
        if target.db:
            signs = (records, keyring)
            yield _local_operator(target, stack, create=create, needs=needs, signs=signs)
        else:
            yield stack.enter_context(_server_client(target))


def _server_client(target: Target) -> WorkloadClient:
    if target.url and target.token:
        # Imported here: httpx is a tenth of a second to import, which a command on a
        # store file never needs.
        from feltdb.client.http import Client

        try:
            return Client(target.url, target.token)
        except WorkloadError as error:  # a URL that is not one: a usage error, exit 2
            raise usage_error(f"--url: {error.message}") from None
    if target.url:
        raise usage_error("--url needs --token (or FELTDB_TOKEN)")
    raise usage_error("no target: give --url and --token, or --db")


def _local_operator(
    target: Target,
    stack: ExitStack,
    *,
    create: bool,
    needs: Iterable[str],
    signs: tuple[bool, Path | None],
) -> LocalClient:
    """A local operator's client on the store ``target.db``, which ``stack`` closes;
    holding a signed grant when ``signs`` (whether it records its grant, the command's
    ``--keyring``) says it records one.
    """
    from feltdb.auth.scope import Scope
    from feltdb.cli.keyrings import choose_keyring, open_keyring
    from feltdb.client.local import LocalClient
    from feltdb.storage.targets import sqlite_path
    from feltdb.work.store import WorkloadStore

    db = str(target.db)
    path = sqlite_path(db)
    if path is not None and not create and not path.exists():
        raise usage_error(
            f"no store at {path} (--db): check the path; submitting work there "
            "(feltdb submit --db) or feltdb serve creates one"
        )
    who = subject_option(target.as_, "--as") if target.as_ else local_operator()
    scope = Scope(target.tenant, target.application)
    # Only a command that records its grant signs one: a read never opens a keyring (a
    # signing secret), let alone creates one (issue 10, point 11). Where it comes from is
    # settled before anything is written or the store opened, so that a refusal connects
    # to nothing; it is read (or made) after, so that a store that cannot be opened leaves
    # no keyring behind.
    records, keyring = signs
    choice = choose_keyring(db, keyring) if records else None
    if path is not None and create:
        # A new store's folder too: submit always made it (the keyring made beside the
        # store used to make it first).
        path.parent.mkdir(parents=True, exist_ok=True)
    store = stack.enter_context(WorkloadStore.open(db))
    if choice is None:
        return LocalClient(store, scope, who)
    now = int(time.time())
    grant = operator_grant(open_keyring(choice), who, scope, now, needs)
    return LocalClient(store, scope, who, grant=grant)


def local_operator() -> Subject:
    """The person running the command: ``human:`` and the login name."""
    from feltdb.auth.subjects import Subject

    return Subject.human(getpass.getuser())


def operator_grant(
    keyring: Keyring, subject: Subject, scope: Scope, now: int, capabilities: Iterable[str]
) -> SignedGrant:
    """The grant a ``--db`` operator acts under: ``capabilities`` (what the command does)
    on the scope's application's workloads, to ``subject``, issued by itself, for
    :data:`OPERATOR_GRANT_LIFETIME_S`, signed with ``keyring`` as evidence (the
    ``authorization_snapshot`` of what it submits): never a token.
    """
    from feltdb.auth.policy import application_grant

    grant = application_grant(
        subject,
        scope.tenant_id,
        scope.application_id,
        capabilities,
        issued_at=now,
        expires_at=now + OPERATOR_GRANT_LIFETIME_S,
    )
    return keyring.evidence(grant)


def collect(read: Callable[[str | None, int], Page], limit: int) -> builtins.list[WorkloadSummary]:
    """Up to ``limit`` workloads from the pages ``read(cursor, size)`` answers, following
    each page's cursor until it is ``None`` or enough are found. A page may hold fewer than
    asked for (a filtered page), so the cursor, not the count, ends the walk.
    """
    from feltdb.client.protocol import MAX_PAGE

    found: builtins.list[WorkloadSummary] = []
    cursor: str | None = None
    while len(found) < limit:
        page = read(cursor, min(limit - len(found), MAX_PAGE))
        found.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found[:limit]
