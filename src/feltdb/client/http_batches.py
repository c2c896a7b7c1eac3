"""The HTTP clients' batch calls, over ``/v1/batches/...`` (:class:`~feltdb.client.Client`
and :class:`~feltdb.client.AsyncClient` alike).

Each answers per item, in order: the item's value, or a
:class:`~feltdb.client.refusals.ClientError` with the code, message, details and HTTP
status the server answered for that item. A submission the model refuses is refused here,
before anything is sent (status ``None``), and the others are sent. A refusal of the whole
request (the token, the body's size or shape) is raised, as a single call's is.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from feltdb.client.batches import (
    CompletionLike,
    HeartbeatLike,
    completion_item,
    heartbeat_item,
)
from feltdb.client.calls import Steps, ask, operation, shaped_as
from feltdb.client.protocol import SubmissionLike, WorkloadClient, as_submission
from feltdb.client.refusals import ClientError
from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadClaim, WorkloadResult
from feltdb.tracing import with_trace_context
from feltdb.work.batches import per_item
from feltdb.work.claimed import ClaimedWork, LeaseRenewal
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.submission import submission_fields

T = TypeVar("T")


def item_answers(
    document: Mapping[str, Any], name: str, parse: Callable[[Mapping[str, Any]], T]
) -> builtins.list[T | WorkloadError]:
    """A batch answer's items: ``parse`` of each answered one (``{"status", name}``), a
    :class:`ClientError` of each refused one (``{"status", "error"}``).
    """
    answers: builtins.list[T | WorkloadError] = []
    for item in document["items"]:
        error = item.get("error")
        if error is None:
            answers.append(parse(item))
            continue
        answers.append(
            ClientError(
                error["code"], error["message"], error.get("details"), status=item["status"]
            )
        )
    return answers


def _fields(submission: SubmissionLike) -> dict[str, Any]:
    try:
        return with_trace_context(submission_fields(as_submission(submission)))
    except WorkloadError as error:
        raise ClientError(error.code, error.message, error.details) from None


class HttpBatches:
    """The batch calls."""

    @operation
    def admit_many(
        self, submissions: Sequence[SubmissionLike]
    ) -> Steps[builtins.list[tuple[Workload, bool] | WorkloadError]]:
        """See :meth:`WorkloadClient.admit_many` (``POST /v1/batches/workloads``)."""
        prepared = per_item(submissions, _fields, lambda ready: ready)
        bodies = [entry for entry in prepared if not isinstance(entry, WorkloadError)]
        if not bodies:
            return [entry for entry in prepared if isinstance(entry, WorkloadError)]  # none to send
        document = yield from ask("POST", "/v1/batches/workloads", {"items": bodies})
        answers = iter(
            item_answers(
                document, "workload", lambda i: (Workload.parse(i["workload"]), i["status"] == 201)
            )
        )
        return [entry if isinstance(entry, WorkloadError) else next(answers) for entry in prepared]

    @operation
    @shaped_as(WorkloadClient.claim_many)
    def claim_many(self, limit: int, **options: Any) -> Steps[builtins.list[WorkloadClaim]]:
        """See :meth:`WorkloadClient.claim_many` (whose parameters and docstring these are)."""
        claimed = yield from claiming(limit, **{"start": False, **options})
        return [work.claim for work in claimed]

    @operation
    @shaped_as(WorkloadClient.claim_work)
    def claim_work(self, limit: int, **options: Any) -> Steps[builtins.list[ClaimedWork]]:
        """See :meth:`WorkloadClient.claim_work` (``POST /v1/batches/claims``)."""
        return (yield from claiming(limit, **options))

    @operation
    def complete_many(
        self, items: Sequence[CompletionLike]
    ) -> Steps[builtins.list[WorkloadResult | WorkloadError]]:
        """See :meth:`WorkloadClient.complete_many` (``POST /v1/batches/completions``)."""
        body = {"items": [completion_item(item).fields() for item in items]}
        document = yield from ask("POST", "/v1/batches/completions", body)
        return item_answers(document, "result", lambda i: WorkloadResult.parse(i["result"]))

    @operation
    def heartbeat_many(
        self, items: Sequence[HeartbeatLike]
    ) -> Steps[builtins.list[WorkloadClaim | WorkloadError]]:
        """See :meth:`WorkloadClient.heartbeat_many` (``POST /v1/batches/heartbeats``)."""
        renewed = yield from renewing(items)
        return [r if isinstance(r, WorkloadError) else r.claim for r in renewed]

    @operation
    def renew_leases(
        self, items: Sequence[HeartbeatLike]
    ) -> Steps[builtins.list[LeaseRenewal | WorkloadError]]:
        """See :meth:`WorkloadClient.renew_leases` (``POST /v1/batches/heartbeats``)."""
        return (yield from renewing(items))


def claiming(
    limit: int,
    *,
    lease_ms: int = DEFAULT_LEASE_MS,
    wait_ms: int = 0,
    capabilities: Iterable[str] | None = None,
    definitions: Iterable[str] | None = None,
    start: bool = True,
) -> Steps[builtins.list[ClaimedWork]]:
    """``POST /v1/batches/claims``: each claim with its workload."""
    body: dict[str, Any] = {
        "limit": limit, "lease_ms": lease_ms, "start": start, "wait_ms": wait_ms,
    }  # fmt: skip
    if capabilities is not None:
        body["capabilities"] = sorted(capabilities)
    if definitions is not None:
        body["definitions"] = sorted(definitions)
    # The server may hold the request for wait_ms: the client waits that much longer.
    document = yield from ask("POST", "/v1/batches/claims", body, wait_ms=wait_ms)
    return [
        ClaimedWork(WorkloadClaim.parse(item["claim"]), Workload.parse(item["workload"]))
        for item in document["items"]
    ]


def renewing(items: Sequence[HeartbeatLike]) -> Steps[builtins.list[LeaseRenewal | WorkloadError]]:
    """``POST /v1/batches/heartbeats``: each extended claim, or the item's refusal."""
    body = {"items": [heartbeat_item(item).fields() for item in items]}
    document = yield from ask("POST", "/v1/batches/heartbeats", body)
    return item_answers(
        document,
        "claim",
        lambda i: LeaseRenewal(
            WorkloadClaim.parse(i["claim"]), bool(i.get("cancellation_requested"))
        ),
    )
