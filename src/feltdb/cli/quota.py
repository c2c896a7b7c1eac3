"""``feltdb limits quota``: the admission quotas and what they hold now; ``feltdb limits
quota set``: a tenant's (or one grant's) quota, by the store's holder alone
(:mod:`feltdb.work.quotas`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from feltdb.cli.targets import (
    DbOption,
    JsonOption,
    Target,
    connected,
    refusals,
    targeted,
    typed,
    usage_error,
)

if TYPE_CHECKING:
    from feltdb.records.limits import AdmissionQuota, AdmissionQuotas

quota_group = typer.Typer(name="quota", add_completion=False, rich_markup_mode=None)
"""The ``quota`` group, added to ``feltdb limits``."""

MAX_UNFINISHED_TEXT = "1 to 1000000, or none"
PER_SECOND_TEXT = "0.001 to 1000000, or none"


@quota_group.callback(invoke_without_command=True)
@targeted
def quotas(context: typer.Context, json_output: JsonOption = False, *, target: Target) -> None:
    """List the admission quotas and what each holds now: its cap of unfinished work (and
    the work unfinished now, counted up to the cap) and its admissions a second (and what
    its bucket allows now). With --db, the store's holder sees every tenant's (at most
    100; --tenant typed: that tenant's); through a server (--url, --token), a caller sees
    its own tenant's and grant's. `feltdb limits quota set` sets one (--db only).
    """
    if context.invoked_subcommand is not None:
        return
    from feltdb.cli.render import print_json, stdout_console

    if target.db:
        from feltdb.work.store import WorkloadStore

        tenant = target.tenant if typed(context, "tenant") else None
        with refusals(), WorkloadStore.open(target.db) as store:
            found = store.limits.quotas(tenant)
    else:
        with connected(target) as client:
            found = client.admission_quotas()
    if json_output:
        print_json(found.to_json())
        return
    console = stdout_console()
    for line in quota_lines(found):
        console.print(line, markup=False)


def quota_lines(found: AdmissionQuotas) -> list[str]:
    """How a list of quotas is said: a line each."""
    if not found.quotas:
        return ["no admission quota is set"]
    lines = [quota_line(quota) for quota in found.quotas]
    if not found.complete:
        lines.append("(more quotas than one answer lists: the first 100 are shown)")
    return lines


def quota_line(quota: AdmissionQuota) -> str:
    """One quota on a line: its subject, its cap and rate, and what they hold now."""
    subject = f"tenant {quota.tenant_id}"
    if quota.grant_id is not None:
        subject += f", grant {quota.grant_id}"
    parts = []
    if quota.max_unfinished is not None:
        parts.append(f"{quota.unfinished} of {quota.max_unfinished} unfinished")
    if quota.per_second is not None:
        parts.append(f"{quota.per_second:g} a second ({quota.tokens:g} admissible now)")
    return f"{subject}: {'; '.join(parts)}"


def _bound(text: str | None, option: str, parse: Any, low: float, high: float) -> Any:
    """``text`` of ``option`` read by ``parse`` within ``low`` to ``high``, ``None`` for
    ``none``; a usage error (exit 2) otherwise.
    """
    if text is None or text == "none":
        return None
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        allowed = MAX_UNFINISHED_TEXT if option == "--max-unfinished" else PER_SECOND_TEXT
        raise usage_error(f"{option} {text!r}: {allowed}")
    return value


@quota_group.command("set")
def set_quota(
    tenant: Annotated[str, typer.Argument(metavar="TENANT")],
    grant: Annotated[
        str | None,
        typer.Option("--grant", metavar="GRANT_ID", help="The quota of this grant of TENANT."),
    ] = None,
    max_unfinished: Annotated[
        str | None,
        typer.Option(
            "--max-unfinished", metavar="N", help=f"Unfinished workloads: {MAX_UNFINISHED_TEXT}."
        ),
    ] = None,
    per_second: Annotated[
        str | None,
        typer.Option("--per-second", metavar="R", help=f"Admissions a second: {PER_SECOND_TEXT}."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Set TENANT's admission quota (or, with --grant, the quota of one of its grants): at
    most N unfinished workloads, at most R admissions a second (a bucket of R rounded up).
    An option not given keeps what the quota has; `none` removes that part, and a quota
    with neither is removed. Only the store's holder may: --db, never through a server.
    Other processes apply it within a second.
    """
    if not db:
        raise usage_error("limits quota set needs --db: only the store's holder sets quotas")
    if max_unfinished is None and per_second is None:
        raise usage_error("give --max-unfinished, --per-second, or both")
    cap = _bound(max_unfinished, "--max-unfinished", int, 1, 1_000_000)
    rate = _bound(per_second, "--per-second", float, 0.001, 1_000_000)
    from feltdb.cli.targets import local_operator
    from feltdb.work.store import WorkloadStore

    with refusals(), WorkloadStore.open(db) as store:
        current = store.limits.quota(tenant, grant)
        if current is not None:
            cap = current.max_unfinished if max_unfinished is None else cap
            rate = current.per_second if per_second is None else rate
        actor = str(local_operator())
        store.limits.set_quota(
            tenant, grant_id=grant, max_unfinished=cap, per_second=rate, actor=actor
        )
        now = store.limits.quota(tenant, grant)
    typer.echo(quota_line(now) if now is not None else f"tenant {tenant}: no quota")
