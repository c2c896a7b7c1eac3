"""``feltdb submit``: build a :data:`~feltdb.work.submission.Submission` from the options
and admit it through the target's client.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from feltdb.auth.capabilities import SUBMIT
from feltdb.cli.keyrings import KeyringFileOption
from feltdb.cli.parsing import parse_input, parse_not_before, subject_option
from feltdb.cli.render import print_json, stdout_console
from feltdb.cli.targets import JsonOption, Target, connected, targeted
from feltdb.work.states import BackoffPolicy

submit_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds ``submit``; the root adds it without a name, so it appears at the top level."""


DefinitionArgument = Annotated[
    str, typer.Argument(metavar="DEFINITION", help="The definition to run (its id).")
]
InputOption = Annotated[
    str, typer.Option("--input", "-i", help="The input: JSON text, or @FILE holding JSON.")
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        help="The idempotency key: submitting again with it answers the same workload "
        "(default: a new random key).",
        show_default=False,
    ),
]
PriorityOption = Annotated[int, typer.Option(help="Higher is claimed first.")]
NotBeforeOption = Annotated[
    str | None,
    typer.Option(
        help="Not claimable before: unix seconds, or relative: +30s, +5m, +2h, +1d.",
        show_default=False,
    ),
]
CapabilityOption = Annotated[
    list[str] | None,
    typer.Option(help="A capability a worker must hold to run it (repeatable)."),
]
AfterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--after",
        metavar="ID[:STATE]",
        help="Run only once workload ID is in STATE (default SUCCEEDED); repeatable.",
        show_default=False,
    ),
]
EnvironmentOption = Annotated[str, typer.Option(help="The environment it runs in.")]
ConcurrencyKeyOption = Annotated[
    str | None,
    typer.Option(
        metavar="KEY",
        help="With --concurrency-limit: at most that many of this key's work hold a claim at "
        "once (a customer, an account, an API); `feltdb limits` shows them.",
    ),
]
ConcurrencyLimitOption = Annotated[
    int | None, typer.Option(metavar="N", min=1, max=1000, help="See --concurrency-key.")
]
RateLimitOption = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="The rate limit its starts count against (`feltdb limits rate set NAME N "
        "SECONDS`); a limit not set runs unlimited.",
    ),
]
RateKeyOption = Annotated[
    str | None,
    typer.Option(metavar="KEY", help="With --rate-limit: the key with a window of its own."),
]
FairnessKeyOption = Annotated[
    str | None,
    typer.Option(
        metavar="KEY",
        help="Take turns with other keys' work at each claim (a customer): one key's "
        "backlog never starves another's.",
    ),
]
TraceparentOption = Annotated[
    str | None,
    typer.Option(
        envvar="TRACEPARENT",
        metavar="TRACEPARENT",
        help="The W3C traceparent (00-<trace id>-<span id>-<flags>) whose trace the work's "
        "spans continue (with feltdb[otel]); default: $TRACEPARENT.",
    ),
]
RevisionOption = Annotated[str, typer.Option(help="The definition's revision.")]
TriggerOption = Annotated[str, typer.Option(help="What caused the submission.")]
ApprovalOption = Annotated[
    bool,
    typer.Option("--approval", help="Hold the work until an authorized approver approves it."),
]
ApproverOption = Annotated[
    list[str] | None,
    typer.Option(help="Only this subject, KIND:ID, may decide (repeatable; implies --approval)."),
]
ApproverKindOption = Annotated[
    list[str] | None,
    typer.Option(
        help="A subject kind that may decide: human and/or service (repeatable; implies "
        "--approval; default human)."
    ),
]
Ms = int | None
QueueTimeout = Annotated[Ms, typer.Option(min=1, help="Deadline to be claimed once ready.")]
ClaimTimeout = Annotated[Ms, typer.Option(min=1, help="Deadline to start once claimed.")]
ExecutionTimeout = Annotated[
    Ms, typer.Option(min=1, help="Deadline for an attempt to finish once started.")
]
HeartbeatTimeout = Annotated[Ms, typer.Option(min=1, help="Longest silence between heartbeats.")]
OverallTimeout = Annotated[
    Ms, typer.Option(min=1, help="Deadline for the whole workload, from creation.")
]
ApprovalTimeout = Annotated[Ms, typer.Option(min=1, help="Longest wait for an approval decision.")]
MaxAttemptsOption = Annotated[
    int | None, typer.Option(min=1, help="Attempts allowed, the first included.")
]
InitialDelayOption = Annotated[
    int | None, typer.Option(min=0, help="Delay before the first automatic retry.")
]
MaxDelayOption = Annotated[
    int | None, typer.Option(min=0, help="Longest delay between automatic retries.")
]
BackoffOption = Annotated[BackoffPolicy | None, typer.Option(help="How the retry delay grows.")]
RetryOnOption = Annotated[
    list[str] | None,
    typer.Option(
        help="A failure kind retried automatically (repeatable; default timeout, "
        "worker_failure, transient_connection)."
    ),
]


@submit_app.command()
@targeted
def submit(
    definition: DefinitionArgument,
    input: InputOption = "{}",
    key: KeyOption = None,
    priority: PriorityOption = 0,
    not_before: NotBeforeOption = None,
    capability: CapabilityOption = None,
    after: AfterOption = None,
    concurrency_key: ConcurrencyKeyOption = None,
    concurrency_limit: ConcurrencyLimitOption = None,
    rate_limit: RateLimitOption = None,
    rate_key: RateKeyOption = None,
    fairness_key: FairnessKeyOption = None,
    traceparent: TraceparentOption = None,
    environment: EnvironmentOption = "production",
    revision: RevisionOption = "1",
    trigger: TriggerOption = "cli",
    approval: ApprovalOption = False,
    approver: ApproverOption = None,
    approver_kind: ApproverKindOption = None,
    queue_timeout_ms: QueueTimeout = None,
    claim_timeout_ms: ClaimTimeout = None,
    execution_timeout_ms: ExecutionTimeout = None,
    heartbeat_timeout_ms: HeartbeatTimeout = None,
    overall_timeout_ms: OverallTimeout = None,
    approval_timeout_ms: ApprovalTimeout = None,
    max_attempts: MaxAttemptsOption = None,
    initial_delay_ms: InitialDelayOption = None,
    max_delay_ms: MaxDelayOption = None,
    backoff: BackoffOption = None,
    retry_on: RetryOnOption = None,
    keyring: KeyringFileOption = None,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Submit work: prints its id and state ("already submitted": its key's work exists),
    and with --db, on stderr, the keyring that signs its grant.
    """
    from feltdb.client.protocol import given_fields  # here, as every command: not for --help

    fields = given_fields({
        "environment": environment, "definition_id": definition,
        "definition_revision": revision, "trigger": trigger, "input": parse_input(input),
        "idempotency_key": key if key is not None else str(uuid.uuid4()),
        "capability_snapshot": capability or [], "trace_context": _traced(traceparent),
        "dependencies": [parse_dependency(text) for text in after or []], "priority": priority,
        "not_before": parse_not_before(not_before, int(time.time())) if not_before else None,
        "retry_policy": _retry(max_attempts, initial_delay_ms, max_delay_ms, backoff, retry_on),
        "timeouts": _given(
            queue_ms=queue_timeout_ms, claim_ms=claim_timeout_ms,
            execution_ms=execution_timeout_ms, heartbeat_ms=heartbeat_timeout_ms,
            overall_ms=overall_timeout_ms, approval_ms=approval_timeout_ms,
        ),
        "approval": _approval(approval, approver, approver_kind),
        **_limits(concurrency_key, concurrency_limit, rate_limit, rate_key, fairness_key),
    })  # fmt: skip
    _submit(target, fields, json_output, keyring)


def _traced(traceparent: str | None) -> dict[str, str] | None:
    """The trace context ``--traceparent`` names (``None``: none)."""
    return {"traceparent": traceparent} if traceparent else None


def _limits(*given: str | int | None) -> dict[str, Any]:
    """The limits' and fairness's fields of a submission, in this order (``None``: not
    given).
    """
    names = ("concurrency_key", "concurrency_limit", "rate_limit", "rate_key", "fairness_key")
    return dict(zip(names, given, strict=True))


def _submit(
    target: Target, fields: dict[str, Any], json_output: bool, keyring: Path | None
) -> None:
    """Submit the request ``fields`` make, and say what became of it. With ``--db``, the
    submission keeps a grant signed with the keyring :mod:`feltdb.cli.keyrings` finds
    (``keyring``: the command's ``--keyring``).
    """
    from feltdb.work.disclosure import disclosed
    from feltdb.work.submission import Submission

    with connected(target, create=True, needs=(SUBMIT,), records=True, keyring=keyring) as client:
        workload, created = client.submit(Submission.parse(fields))
    if json_output:
        print_json({"created": created, "workload": disclosed(workload)})
        return
    verb = "submitted" if created else "already submitted"
    stdout_console().print(f"{verb} {workload.workload_id} {workload.state.value}")


def _given(**values: Any) -> dict[str, Any] | None:
    """The options given (not ``None``): a policy's fields, its defaults for the rest;
    ``None`` when none is (the policy's defaults stand).
    """
    return {name: value for name, value in values.items() if value is not None} or None


def _retry(
    max_attempts: int | None,
    initial_delay_ms: int | None,
    max_delay_ms: int | None,
    backoff: BackoffPolicy | None,
    retry_on: list[str] | None,
) -> dict[str, Any] | None:
    """The retry policy the options ask for (``None``: its defaults)."""
    return _given(
        max_attempts=max_attempts, initial_delay_ms=initial_delay_ms,
        max_delay_ms=max_delay_ms, backoff=backoff, retry_on=retry_on or None,
    )  # fmt: skip


def _approval(
    required: bool, approvers: list[str] | None, kinds: list[str] | None
) -> dict[str, Any] | None:
    """The approval policy the options ask for, or ``None`` when none is."""
    if not (required or approvers or kinds):
        return None
    policy: dict[str, Any] = {
        "approvers": [subject_option(text, "--approver") for text in approvers or []]
    }
    if kinds:
        policy["approver_kinds"] = kinds
    return policy


def parse_dependency(text: str) -> dict[str, str]:
    """``ID`` or ``ID:STATE`` (a state's name, any case) as a dependency's fields.

    Raises:
        typer.BadParameter: an empty id, or a state that is not one (exit 2).
    """
    from feltdb.work.states import WorkloadState

    workload_id, _, state = text.partition(":")
    if not workload_id:
        raise typer.BadParameter(f"{text!r}: ID[:STATE], the id first", param_hint="--after")
    if not state:
        return {"workload_id": workload_id, "required_state": WorkloadState.SUCCEEDED.value}
    named = state.upper()
    if named not in WorkloadState.__members__:
        states = ", ".join(s.value for s in WorkloadState)
        raise typer.BadParameter(f"{state!r} is not a state: one of {states}", param_hint="--after")
    return {"workload_id": workload_id, "required_state": named}
