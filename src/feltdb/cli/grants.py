"""The ``feltdb keys`` and ``feltdb grant`` commands: make a keyring, mint tokens, revoke
grants and list the revoked ones.

Tokens are printed with ``typer.echo`` (never rich), so that no line wrapping ever splits
one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from feltdb.auth.capabilities import ALL_CAPABILITIES, CLAIM, REVOKE
from feltdb.cli.parsing import parse_subject
from feltdb.cli.render import print_json, stdout_console, when
from feltdb.cli.targets import JsonOption, Target, connected, targeted

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from feltdb.auth.grants import Grant, ResourceScope
    from feltdb.auth.tokens import Keyring

DEFAULT_KEYRING = Path("feltdb-keyring.json")
DEFAULT_SERVER = "http://127.0.0.1:8700"
"""Where ``feltdb serve`` listens unless told otherwise."""
WORKER_LIFETIME_S = 30 * 86400
"""How long a worker's grant (``--worker``) lasts unless told: a month, for a process that
runs for weeks; ``feltdb worker --token-file`` takes the next one without a restart."""

auth_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the ``keys`` and ``grant`` groups; the root adds it without a name, so the two
groups appear at the top level."""

keys_app = typer.Typer(help="Signing keyrings.", no_args_is_help=True, rich_markup_mode=None)
grant_app = typer.Typer(
    help="Grants, as bearer tokens.", no_args_is_help=True, rich_markup_mode=None
)
auth_app.add_typer(keys_app, name="keys")
auth_app.add_typer(grant_app, name="grant")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


@keys_app.command("new")
def keys_new(
    out: Annotated[
        Path, typer.Option(help="Where to write the keyring (mode 0600); never overwritten.")
    ] = DEFAULT_KEYRING,
) -> None:
    """Create a keyring with one new random signing key."""
    from feltdb.auth.tokens import Keyring

    keyring = Keyring.generate()
    try:
        keyring.save(out, exclusive=True)
    except FileExistsError:
        raise _fail(f"{out} exists; refusing to overwrite a keyring") from None
    except OSError as error:
        raise _fail(f"cannot write {out}: {error.strerror or error}") from None
    typer.echo(f"wrote keyring {out} (active key {keyring.active})")


def resource_scope(uri: str, application_id: str) -> ResourceScope:
    """A scope for ``uri``: a workload scope under ``flow://APP/workloads/``, else the app's."""
    from feltdb.auth.grants import ResourceScope, ResourceScopeKind

    if uri.startswith(f"flow://{application_id}/workloads/"):
        return ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri=uri)
    return ResourceScope(kind=ResourceScopeKind.APPLICATION, uri=uri)


SubjectOption = Annotated[
    str | None,
    typer.Option(help="Who the grant is for, as KIND:ID (with --admin: human:admin)."),
]
TenantOption = Annotated[
    str | None,
    typer.Option(help="The tenant the grant acts in (with --admin or --worker: default)."),
]
ApplicationOption = Annotated[
    str | None,
    typer.Option(help="The application the grant acts in (with --admin or --worker: default)."),
]
CapabilityOption = Annotated[
    list[str] | None,
    typer.Option(help="A capability, e.g. workload:claim (repeatable)."),
]
AdminOption = Annotated[
    bool,
    typer.Option(
        "--admin",
        help="An administrator's grant: every capability feltdb checks (not those of "
        "your work, such as email:send), for a day unless --lifetime says otherwise "
        "(the token a first feltdb serve prints, minted again).",
    ),
]
WorkerOption = Annotated[
    str | None,
    typer.Option(
        "--worker",
        metavar="NAME",
        help="A worker's grant: subject worker:NAME, workload:claim and any --capability "
        "(those its work requires, e.g. email:send), in tenant and application default "
        f"unless given, for {WORKER_LIFETIME_S // 86400} days unless --lifetime says "
        "otherwise (a long-running process; feltdb worker --token-file takes a new token "
        "without a restart).",
    ),
]
KeyringOption = Annotated[Path, typer.Option(help="The keyring whose active key signs.")]
ResourceOption = Annotated[
    list[str] | None,
    typer.Option(help="A resource URI glob (repeatable); default flow://APPLICATION/*."),
]
LifetimeOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Seconds the grant is valid from now (3600; --admin: 86400; --worker: "
        f"{WORKER_LIFETIME_S}, {WORKER_LIFETIME_S // 86400} days).",
    ),
]
IssuerOption = Annotated[str, typer.Option(help="Who issues the grant, as KIND:ID.")]
EnvironmentOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Narrow the grant to work of this environment (repeatable): it may submit, "
        "see, claim and act on no other. Default: every environment."
    ),
]
DefinitionOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Narrow the grant to work of this definition id (repeatable), as for "
        "--environment. Default: every definition."
    ),
]


LoginOption = Annotated[
    bool,
    typer.Option(
        "--login",
        help="Print a one-time link that signs a browser in to the dashboard with this "
        "grant, instead of a token. The link works once, within 10 minutes.",
    ),
]
ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server", help=f"The server the --login link points at (default {DEFAULT_SERVER})."
    ),
]


@grant_app.command("issue")
def grant_issue(
    subject: SubjectOption = None,
    tenant: TenantOption = None,
    application: ApplicationOption = None,
    capability: CapabilityOption = None,
    admin: AdminOption = False,
    worker: WorkerOption = None,
    keyring: KeyringOption = DEFAULT_KEYRING,
    resource: ResourceOption = None,
    lifetime: LifetimeOption = None,
    issuer: IssuerOption = "service:feltdb-cli",
    environment: EnvironmentOption = None,
    definition: DefinitionOption = None,
    login: LoginOption = False,
    server: ServerOption = None,
) -> None:
    """Mint a signed grant and print it as a bearer token on stdout (its grant id, to revoke
    it by, on stderr); with --login, a one-time sign-in link to the dashboard instead.
    """
    from feltdb.auth.tokens import Keyring  # here, as every command: not for --help

    try:
        ring = Keyring.load(keyring)
    except OSError as error:
        raise _fail(f"cannot read keyring {keyring}: {error.strerror or error}") from None
    preset = _preset(admin, worker, subject)
    if preset is not None:
        subject, implied = preset
        tenant, application = tenant or "default", application or "default"
        capability = sorted({*(capability or ()), *implied})
    missing = [
        f"--{name}"
        for name, value in (
            ("subject", subject),
            ("tenant", tenant),
            ("application", application),
            ("capability", capability),
        )
        if not value
    ]
    if missing or subject is None or tenant is None or application is None:
        raise typer.BadParameter(f"give {', '.join(missing)} (or --admin, or --worker NAME)")
    if server is not None and not login:
        raise typer.BadParameter("--server names where a --login link points: give --login")
    lasts = lifetime or (86400 if admin else WORKER_LIFETIME_S if worker is not None else 3600)
    narrowed = (resource, environment, definition)
    grant = _new_grant((issuer, subject), (tenant, application), capability, narrowed, lasts)
    _print_issued(ring, grant, (server or DEFAULT_SERVER) if login else None)


def _preset(
    admin: bool, worker: str | None, subject: str | None
) -> tuple[str, frozenset[str]] | None:
    """The subject and the capabilities ``--admin`` or ``--worker`` imply (``None``:
    neither was given).

    Raises:
        typer.BadParameter: both were given, or ``--worker`` and ``--subject``.
    """
    if admin and worker is not None:
        raise typer.BadParameter("give --admin or --worker, not both")
    if admin:
        return subject or "human:admin", ALL_CAPABILITIES
    if worker is None:
        return None
    if subject is not None:
        raise typer.BadParameter(f"--worker {worker} is the subject worker:{worker}: not both")
    return f"worker:{worker}", frozenset({CLAIM})


def _new_grant(
    who: tuple[str, str],
    where: tuple[str, str],
    capability: list[str] | None,
    narrowed: tuple[list[str] | None, list[str] | None, list[str] | None],
    lifetime: int,
) -> Grant:
    """The grant ``grant issue`` mints: from ``who`` (issuer, subject) to act in ``where``
    (tenant, application), holding ``capability``, on the ``narrowed`` resources,
    environments and definitions, for ``lifetime`` seconds from now.
    """
    from feltdb.auth.grants import Grant, GrantConstraints, new_grant_id

    (issuer, subject), (tenant, application) = who, where
    resource, environment, definition = narrowed
    now = int(time.time())
    return Grant(
        id=new_grant_id(),
        issuer=parse_subject(issuer),
        subject=parse_subject(subject),
        tenant_id=tenant,
        application_id=application,
        capabilities=frozenset(capability or ()),
        resources=[
            resource_scope(uri, application) for uri in resource or [f"flow://{application}/*"]
        ],
        constraints=GrantConstraints(
            environments=frozenset(environment or ()), definitions=frozenset(definition or ())
        ),
        issued_at=now,
        expires_at=now + lifetime,
    )


def _print_issued(ring: Keyring, grant: Grant, login_server: str | None) -> None:
    """Print ``grant`` signed: as a bearer token, or (given the server the dashboard is
    at) as a one-time sign-in link; its id, to revoke it by, on stderr.
    """
    from feltdb.auth.sessions import TICKET_LIFETIME_S, issue_ticket

    revoke = f"revoke it with: feltdb grant revoke {grant.id}"
    if login_server is None:
        typer.echo(ring.sign(grant))
        typer.echo(f"grant {grant.id} ({revoke})", err=True)
        return
    ticket = issue_ticket(ring, grant, grant.issued_at)
    typer.echo(f"{login_server.rstrip('/')}/ui/login#ticket={ticket}")
    usable_s = min(TICKET_LIFETIME_S, grant.expires_at - grant.issued_at)
    within = f"{usable_s // 60} minutes" if usable_s >= 120 else f"{usable_s} seconds"
    typer.echo(
        f"a sign-in link for grant {grant.id}: it works once, within {within} ({revoke})",
        err=True,
    )


@grant_app.command("revoke")
@targeted
def grant_revoke(
    grant_id: Annotated[str, typer.Argument(metavar="GRANT_ID", help="The grant's id.")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Revoke even an id feltdb never minted (one your own code made); without "
            "it such an id, most often a typo, is refused and nothing is revoked.",
        ),
    ] = False,
    *,
    target: Target,
) -> None:
    """Revoke a grant of the tenant and application (grant issue prints its id): every
    request under it is refused from then on. Needs grant:revoke over the application.
    """
    with connected(target, needs=(REVOKE,)) as client:
        revoked = client.revoke_grant(grant_id, force=force)
    stdout_console().print(f"revoked grant {grant_id}" + ("" if revoked else " (it already was)"))


@grant_app.command("list")
@targeted
def grant_list(json_output: JsonOption = False, *, target: Target) -> None:
    """List the grants revoked in the tenant and application, oldest first (minted grants
    are not recorded anywhere: a grant is a signed token, checked by its signature).
    """
    with connected(target, needs=(REVOKE,)) as client:
        found = client.revocations()
    if json_output:
        print_json(found)
        return
    if not found:
        stdout_console().print("revoked grants: none")
        return
    for entry in found:
        typer.echo(
            f"{entry['grant_id']}\trevoked {when(entry['revoked_at'])} by {entry['revoked_by']}"
        )
