"""The operator commands of ``feltdb``: submit, list, show, decide, cancel, retry, audit and
migrate work, against a server (``--url``/``--token``) or a store (``--db``).

Each command parses its options, opens a :class:`~feltdb.cli_target.Target`, makes its
calls and renders the answer (:mod:`feltdb.cli_render`). Exit codes: 0 done; 1 a refusal
(``error CODE: message`` on stderr, never a traceback); 2 a usage error (a missing target,
bad JSON, a malformed option).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from feltdb.auth.policy import APPROVE, AUDIT, CANCEL, OPERATE, READ, REVOKE, SUBMIT
from feltdb.cli_auth import grant_app, parse_subject
from feltdb.cli_render import (
    audit_line,
    print_json,
    show_workload,
    stdout_console,
    when,
    workload_table,
)
from feltdb.cli_target import (
    ServerTarget,
    Submission,
    Target,
    open_store_target,
)
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import sqlite_path
from feltdb.work.disclosure import disclosed
from feltdb.work.models import ApprovalPolicy, WorkloadRetryPolicy, WorkloadTimeouts
from feltdb.work.states import ApprovalOutcome, BackoffPolicy, WorkloadState
from feltdb.work.store import WorkloadStore

ORDER = "in order: highest priority, then oldest, first"
"""The order of every list, as its title says."""

ops_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the operator commands; ``cli.py`` adds it without a name, so they appear at the
top level."""

AUDIT_PAGE = 100
"""Transactions asked for per audit request."""

# ------------------------------------------------------------------ the target options

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", envvar="FELTDB_URL", help="The feltdb server, e.g. http://127.0.0.1:8700."
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="FELTDB_TOKEN",
        help="The bearer token to call the server with (its grant is who you are).",
        show_default=False,
    ),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Act on this store directly (a SQLite file or a URL) as a local operator, "
        "instead of through a server. Takes precedence over --url.",
    ),
]
TenantOption = Annotated[
    str, typer.Option(envvar="FELTDB_TENANT", help="With --db: the tenant to act in.")
]
ApplicationOption = Annotated[
    str, typer.Option(envvar="FELTDB_APPLICATION", help="With --db: the application to act in.")
]
AsOption = Annotated[
    str | None,
    typer.Option(
        "--as",
        envvar="FELTDB_SUBJECT",
        help="With --db: who the local operator acts as, KIND:ID (default human:$USER). "
        "A server takes who you are from the token instead.",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (records as the API answers them), only.")
]


def usage_error(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; the exit (2) of a usage error, to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _refused(error: WorkloadError) -> typer.Exit:
    typer.echo(f"error {error.code}: {error.message}", err=True)
    return typer.Exit(1)


@contextmanager
def _refusals() -> Iterator[None]:
    """Turn the refusals an operator is expected to meet into exit 1 with the code on
    stderr: a store's or server's refusal, an unreachable server, an unreadable keyring.
    """
    try:
        yield
    except WorkloadError as error:
        raise _refused(error) from None
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        typer.echo(f"error: cannot use{where}: {error.strerror or error}", err=True)
        raise typer.Exit(1) from None


def open_target(
    url: str | None,
    token: str | None,
    db: str | None,
    tenant: str = "default",
    application: str = "default",
    subject: str | None = None,
    *,
    create: bool = False,
    needs: Iterable[str] = (),
    records: bool = False,
) -> Target:
    """The target the options name: the store ``db`` when given, else the server ``url``.
    A SQLite store file that does not exist is created only with ``create`` (by the
    commands that add work): for the others a mistyped path is an error, not an empty store.

    Raises:
        typer.Exit: (2, after saying why) neither is given, ``url`` without ``token``, or
            no store file at ``db`` without ``create``.
        WorkloadError: the store cannot be opened.
    """
    if db:
        path = sqlite_path(db)
        if path is not None and not create and not path.exists():
            raise usage_error(
                f"no store at {path} (--db): check the path; submitting work there "
                "(feltdb submit --db) or feltdb serve creates one"
            )
        who = None
        if subject:
            try:
                who = parse_subject(subject)
            except WorkloadError as error:
                raise typer.BadParameter(error.message, param_hint="--as") from None
        return open_store_target(db, tenant, application, who, capabilities=needs, records=records)
    if url and token:
        try:
            return ServerTarget(url, token)
        except WorkloadError as error:  # a URL that is not one: a usage error, exit 2
            raise usage_error(f"--url: {error.message}") from None
    if url:
        raise usage_error("--url needs --token (or FELTDB_TOKEN)")
    raise usage_error("no target: give --url and --token, or --db")


@contextmanager
def connected(
    url: str | None,
    token: str | None,
    db: str | None,
    tenant: str = "default",
    application: str = "default",
    subject: str | None = None,
    *,
    create: bool = False,
    needs: Iterable[str] = (),
    records: bool = False,
) -> Iterator[Target]:
    """:func:`open_target`, closed on exit, with refusals turned into exit 1. ``needs`` is
    what the command does (capabilities): with ``--db``, the operator's grant holds only
    these.
    """
    with _refusals():
        target = open_target(
            url,
            token,
            db,
            tenant,
            application,
            subject,
            create=create,
            needs=needs,
            records=records,
        )
        try:
            yield target
        finally:
            target.close()


# ------------------------------------------------------------------ parsing helpers


def parse_input(text: str) -> Any:
    """``text`` as JSON, or the JSON of the file ``@PATH`` names.

    Raises:
        typer.BadParameter: not JSON, or the file cannot be read (exit 2).
    """
    source = "--input"
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise typer.BadParameter(
                f"cannot read {path}: {error.strerror or error}", param_hint=source
            ) from None
        source = f"--input ({path})"
    try:
        return json.loads(text, parse_constant=_not_a_json_number, parse_float=_finite)
    except (ValueError, RecursionError) as error:
        raise typer.BadParameter(f"not JSON: {error}", param_hint=source) from None


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a JSON number")
    return value


def _not_a_json_number(name: str) -> Any:
    # Python's json reads NaN and Infinity, which JSON has not: refuse them here, where a
    # person can fix the command, not at the server (issue 10, point 3).
    raise ValueError(f"{name} is not a JSON number")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_not_before(text: str, now: int) -> int:
    """An instant: unix seconds (``1767225600``), or from ``now`` (``+30s``, ``+5m``,
    ``+2h``, ``+1d``; a bare ``+90`` is seconds).

    Raises:
        typer.BadParameter: anything else (exit 2).
    """
    if text.isdigit():
        return int(text)
    if text.startswith("+"):
        amount, unit = text[1:], "s"
        if amount[-1:] in _UNITS:
            amount, unit = amount[:-1], amount[-1]
        if amount.isdigit():
            return now + int(amount) * _UNITS[unit]
    raise typer.BadParameter(
        f"{text!r} is neither unix seconds nor +N[s|m|h|d]", param_hint="--not-before"
    )


def _approval(
    required: bool, approvers: list[str] | None, kinds: list[str] | None
) -> ApprovalPolicy | None:
    if not (required or approvers or kinds):
        return None
    subjects = []
    for text in approvers or []:
        try:
            subjects.append(parse_subject(text))
        except WorkloadError as error:
            raise typer.BadParameter(error.message, param_hint="--approver") from None
    fields: dict[str, Any] = {"approvers": frozenset(subjects)}
    if kinds:
        fields["approver_kinds"] = frozenset(kinds)
    return ApprovalPolicy(**fields)


# ------------------------------------------------------------------ commands


@ops_app.command()
def submit(
    definition: Annotated[
        str, typer.Argument(metavar="DEFINITION", help="The definition to run (its id).")
    ],
    input: Annotated[
        str, typer.Option("--input", "-i", help="The input: JSON text, or @FILE holding JSON.")
    ] = "{}",
    key: Annotated[
        str | None,
        typer.Option(
            help="The idempotency key: submitting again with it answers the same workload "
            "(default: a new random key).",
            show_default=False,
        ),
    ] = None,
    priority: Annotated[int, typer.Option(help="Higher is claimed first.")] = 0,
    not_before: Annotated[
        str | None,
        typer.Option(
            help="Not claimable before: unix seconds, or relative: +30s, +5m, +2h, +1d.",
            show_default=False,
        ),
    ] = None,
    capability: Annotated[
        list[str] | None,
        typer.Option(help="A capability a worker must hold to run it (repeatable)."),
    ] = None,
    environment: Annotated[str, typer.Option(help="The environment it runs in.")] = "production",
    revision: Annotated[str, typer.Option(help="The definition's revision.")] = "1",
    trigger: Annotated[str, typer.Option(help="What caused the submission.")] = "cli",
    approval: Annotated[
        bool,
        typer.Option("--approval", help="Hold the work until an authorized approver approves it."),
    ] = False,
    approver: Annotated[
        list[str] | None,
        typer.Option(
            help="Only this subject, KIND:ID, may decide (repeatable; implies --approval)."
        ),
    ] = None,
    approver_kind: Annotated[
        list[str] | None,
        typer.Option(
            help="A subject kind that may decide: human and/or service (repeatable; implies "
            "--approval; default human)."
        ),
    ] = None,
    queue_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Deadline to be claimed once ready.")
    ] = None,
    claim_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Deadline to start once claimed.")
    ] = None,
    execution_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Deadline for an attempt to finish once started.")
    ] = None,
    heartbeat_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Longest silence between heartbeats.")
    ] = None,
    overall_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Deadline for the whole workload, from creation.")
    ] = None,
    approval_timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Longest wait for an approval decision.")
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option(min=1, help="Attempts allowed, the first included.")
    ] = None,
    initial_delay_ms: Annotated[
        int | None, typer.Option(min=0, help="Delay before the first automatic retry.")
    ] = None,
    max_delay_ms: Annotated[
        int | None, typer.Option(min=0, help="Longest delay between automatic retries.")
    ] = None,
    backoff: Annotated[
        BackoffPolicy | None, typer.Option(help="How the retry delay grows.")
    ] = None,
    retry_on: Annotated[
        list[str] | None,
        typer.Option(
            help="A failure kind retried automatically (repeatable; default timeout, "
            "worker_failure, transient_connection)."
        ),
    ] = None,
    json_output: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Submit work: prints its id and state ("already submitted" when the key was used
    before for the same request).
    """
    retry_fields = {
        name: value
        for name, value in (
            ("max_attempts", max_attempts),
            ("initial_delay_ms", initial_delay_ms),
            ("max_delay_ms", max_delay_ms),
            ("backoff", backoff),
            ("retry_on", frozenset(retry_on) if retry_on else None),
        )
        if value is not None
    }
    timeout_fields = {
        name: value
        for name, value in (
            ("queue_ms", queue_timeout_ms),
            ("claim_ms", claim_timeout_ms),
            ("execution_ms", execution_timeout_ms),
            ("heartbeat_ms", heartbeat_timeout_ms),
            ("overall_ms", overall_timeout_ms),
            ("approval_ms", approval_timeout_ms),
        )
        if value is not None
    }
    document = parse_input(input)
    eligible = parse_not_before(not_before, int(time.time())) if not_before else None
    with connected(
        url, token, db, tenant, application, as_, create=True, needs=(SUBMIT,), records=True
    ) as target:
        request = Submission(
            environment=environment,
            definition_id=definition,
            definition_revision=revision,
            trigger=trigger,
            input=document,
            idempotency_key=key if key is not None else str(uuid.uuid4()),
            capability_snapshot=frozenset(capability or ()),
            priority=priority,
            not_before=eligible,
            retry_policy=WorkloadRetryPolicy(**retry_fields) if retry_fields else None,
            timeouts=WorkloadTimeouts(**timeout_fields) if timeout_fields else None,
            approval=_approval(approval, approver, approver_kind),
        )
        workload, created = target.admit(request)
    if json_output:
        print_json({"created": created, "workload": disclosed(workload)})
        return
    verb = "submitted" if created else "already submitted"
    stdout_console().print(f"{verb} {workload.workload_id} {workload.state.value}")


@ops_app.command("ls")
def list_workloads(
    state: Annotated[
        WorkloadState | None, typer.Option(help="Only work in this state.", case_sensitive=False)
    ] = None,
    definition: Annotated[str | None, typer.Option(help="Only work of this definition id.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 50,
    everything: AllOption = False,
    json_output: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """List work, highest priority first, then oldest first (the order a worker takes it).
    Says on stderr when there is more than --limit (50): --all lists everything.
    """
    with connected(url, token, db, tenant, application, as_, needs=(READ,)) as target:
        found = target.list(state=state, definition=definition, limit=_asked(limit, everything))
    _print_list(found, "workloads", json_output, EVERYTHING if everything else limit)


@ops_app.command()
def inbox(
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 50,
    everything: AllOption = False,
    json_output: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """List work awaiting an approval decision (decide with approve / reject)."""
    with connected(url, token, db, tenant, application, as_, needs=(APPROVE,)) as target:
        found = target.approvals(_asked(limit, everything))
    _print_list(found, "awaiting approval", json_output, EVERYTHING if everything else limit)


@ops_app.command()
def dead(
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 50,
    everything: AllOption = False,
    json_output: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """List dead-lettered work: it will not run again unless retried (see retry)."""
    with connected(url, token, db, tenant, application, as_, needs=(OPERATE,)) as target:
        found = target.dead_letters(_asked(limit, everything))
    _print_list(
        found, "dead letters", json_output, EVERYTHING if everything else limit, reasons=True
    )


AllOption = Annotated[
    bool, typer.Option("--all", help="All of them, however many (pages through them).")
]

EVERYTHING = 2**62
"""The ``--limit`` of ``--all``: more than any store holds."""


def _asked(limit: int, everything: bool) -> int:
    """How many to fetch: one more than shown, to know whether there are more."""
    return EVERYTHING if everything else limit + 1


def _print_list(
    found: list[Any], title: str, json_output: bool, limit: int, *, reasons: bool = False
) -> None:
    """Print up to ``limit`` of ``found`` (a table, or JSON only), and say on stderr when
    there were more and how to see them.
    """
    shown = found[:limit]
    if json_output:
        print_json([disclosed(w) for w in shown])
    else:
        workload_table(stdout_console(), shown, title, reasons=reasons, order=ORDER)
    if len(found) > limit:
        typer.echo(
            f"{len(shown)} shown; there are more: --limit N for more, --all for all of them",
            err=True,
        )


@ops_app.command()
def show(
    workload_id: Annotated[str, typer.Argument(metavar="ID", help="The workload id.")],
    json_output: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Show one workload: its fields, attempts, checkpoints, result, approval and the
    timeline of every committed transition.
    """
    with connected(url, token, db, tenant, application, as_, needs=(READ,)) as target:
        workload = target.get(workload_id)
    if json_output:
        print_json(disclosed(workload))
    else:
        show_workload(stdout_console(), workload)


def _decide(target: Target, workload_id: str, outcome: ApprovalOutcome, reason: str | None) -> None:
    # The decision binds to the input as read now: if it changed since, the authority
    # refuses (WORKLOAD_APPROVAL_STALE) rather than approve what nobody reviewed.
    reviewed = target.get(workload_id)
    decision, replayed = target.decide(workload_id, outcome, reason, reviewed.input_hash)
    state = target.get(workload_id).state
    note = " (already decided)" if replayed else ""
    stdout_console().print(
        f"{decision.outcome.value} {workload_id} by {decision.decided_by}{note}: {state.value}"
    )


@ops_app.command()
def approve(
    workload_id: Annotated[str, typer.Argument(metavar="ID", help="The workload id.")],
    reason: Annotated[str | None, typer.Option(help="Why (kept with the decision).")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Approve held work, bound to its current input: it becomes claimable."""
    with connected(
        url, token, db, tenant, application, as_, needs=(APPROVE,), records=True
    ) as target:
        _decide(target, workload_id, ApprovalOutcome.APPROVED, reason)


@ops_app.command()
def reject(
    workload_id: Annotated[str, typer.Argument(metavar="ID", help="The workload id.")],
    reason: Annotated[str, typer.Option(help="Why (required; kept with the decision).")],
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Reject held work, bound to its current input: it will never run."""
    with connected(
        url, token, db, tenant, application, as_, needs=(APPROVE,), records=True
    ) as target:
        _decide(target, workload_id, ApprovalOutcome.REJECTED, reason)


@ops_app.command()
def cancel(
    workload_id: Annotated[str, typer.Argument(metavar="ID", help="The workload id.")],
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Cancel work: at once when no worker holds it, else by request to its worker."""
    with connected(url, token, db, tenant, application, as_, needs=(CANCEL,)) as target:
        state = target.cancel(workload_id)
    stdout_console().print(f"cancel {workload_id}: {state.value}")


@ops_app.command()
def retry(
    workload_id: Annotated[str, typer.Argument(metavar="ID", help="The workload id.")],
    reason: Annotated[str | None, typer.Option(help="Why (recorded in its history).")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Re-arm failed, dead-lettered or timed-out work for one more attempt."""
    with connected(url, token, db, tenant, application, as_, needs=(OPERATE,)) as target:
        workload = target.retry(workload_id, reason)
    stdout_console().print(f"retry {workload_id}: {workload.state.value}")


@ops_app.command()
def audit(
    since: Annotated[
        int, typer.Option(min=0, help="Show transactions committed after this revision.")
    ] = 0,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep polling for new ones until Ctrl-C, reconnecting (with backoff, said "
            "on stderr) when the server or store is lost.",
        ),
    ] = False,
    interval: Annotated[
        float, typer.Option(min=0.05, help="With --follow: seconds between polls.")
    ] = 1.0,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per transaction per line.")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Print the committed transactions of the application after a revision, oldest
    first, one a line: revision, time, actor, kind/event → state, workload, rows written.
    """
    with connected(url, token, db, tenant, application, as_, needs=(AUDIT,)) as target:
        after = since
        pause = interval
        try:
            while True:
                try:
                    items, next_after = target.audit(after, AUDIT_PAGE)
                except WorkloadError as error:
                    if not follow or error.code != ErrorCode.WORKLOAD_STORAGE_FAILURE:
                        raise
                    # Following outlives a server restart or a lost connection: say so,
                    # and try again, waiting twice as long each time up to a minute.
                    pause = min(max(pause * 2, interval), MAX_FOLLOW_PAUSE_S)
                    typer.echo(f"{error.message}; retrying in {pause:.1f}s", err=True)
                    time.sleep(pause)
                    continue
                if pause != interval:
                    typer.echo("reconnected", err=True)
                    pause = interval
                for transaction in items:
                    if json_output:
                        print_json(transaction.model_dump(mode="json"))
                    else:
                        # Plain and flushed: a line per commit, for tail-like use and pipes.
                        typer.echo(audit_line(transaction))
                if next_after != after:
                    after = next_after
                    continue  # more may follow at once
                if not follow:
                    break
                time.sleep(interval)
        except KeyboardInterrupt:
            # Ctrl-C is how --follow ends: a normal exit.
            return


@grant_app.command("revoke")
def grant_revoke(
    grant_id: Annotated[str, typer.Argument(metavar="GRANT_ID", help="The grant's id.")],
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """Revoke a grant of the tenant and application (grant issue prints its id): every
    request under it is refused from then on. Needs grant:revoke over the application.
    """
    with connected(url, token, db, tenant, application, as_, needs=(REVOKE,)) as target:
        revoked = target.revoke_grant(grant_id)
    stdout_console().print(f"revoked grant {grant_id}" + ("" if revoked else " (it already was)"))


@grant_app.command("list")
def grant_list(
    json_output: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    application: ApplicationOption = "default",
    as_: AsOption = None,
) -> None:
    """List the grants revoked in the tenant and application, oldest first (minted grants
    are not recorded anywhere: a grant is a signed token, checked by its signature).
    """
    with connected(url, token, db, tenant, application, as_, needs=(REVOKE,)) as target:
        found = target.revocations()
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


MAX_FOLLOW_PAUSE_S = 60.0
"""The longest ``audit --follow`` waits between attempts to reach a store it lost."""


@ops_app.command("migrate-legacy")
def migrate_legacy(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="The legacy JSON store file to import.")
    ],
    db: DbOption = None,
) -> None:
    """Import a pre-canonical JSON store file into the store --db names, and verify it
    (idempotent: work already imported identically is skipped, and counted so).

    The file is one JSON object: "workloads" maps each workload id to its record (a
    workload as the API answers it), and "idempotency" ("tenant:application:key" to id),
    "result_ids" (result id to id) and "event_sequence" (the highest event sequence) are
    the evidence the import is verified against. A bad record is named on a line of its
    own (index, id, field, why), and nothing is written.
    """
    if not db:
        raise usage_error("migrate-legacy needs --db, the store to import into")
    console = stdout_console()
    counted = [0]
    written = [0]
    with _refusals(), WorkloadStore.open(db) as store:
        with Progress(
            TextColumn("migrating"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
        ) as bar:
            task = bar.add_task("migrate", total=None)

            def advance(done: int, total: int) -> None:
                counted[0] = done
                bar.update(task, completed=done, total=total)

            def count(workload_id: str, new: bool) -> None:
                written[0] += new

            WorkloadStore.migrate_legacy_file(store.db, file, advance, imported=count)
    skipped = counted[0] - written[0]
    console.print(
        f"migrated {written[0]} workloads from {file} into {db}"
        + (f" ({skipped} already there, skipped)" if skipped else "")
        + ", verified"
    )
