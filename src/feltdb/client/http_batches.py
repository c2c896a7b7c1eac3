""":class:`~feltdb.client.Client`'s batch calls, over ``/v1/batches/...``.

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
from feltdb.client.protocol import SubmissionLike, as_submission
from feltdb.client.refusals import ClientError
from feltdb.client.transport import Transport
from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadClaim, WorkloadResult
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
        return submission_fields(as_submission(submission))
    except WorkloadError as error:
        raise ClientError(error.code, error.message, error.details) from None


class HttpBatches(Transport):
    """The batch calls, over the transport of the class this is mixed into."""

    def admit_many(
        self, submissions: Sequence[SubmissionLike]
    ) -> builtins.list[tuple[Workload, bool] | WorkloadError]:
        """See :meth:`WorkloadClient.admit_many` (``POST /v1/batches/workloads``)."""

        def send(bodies: builtins.list[dict[str, Any]]) -> Sequence[Any]:
            document = self._ask("POST", "/v1/batches/workloads", {"items": bodies})
            return item_answers(
                document, "workload", lambda i: (Workload.parse(i["workload"]), i["status"] == 201)
            )

        return per_item(submissions, _fields, send)

    def claim_work(
        self,
        limit: int,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
        start: bool = True,
    ) -> builtins.list[ClaimedWork]:
        """See :meth:`WorkloadClient.claim_work` (``POST /v1/batches/claims``)."""
        body: dict[str, Any] = {
            "limit": limit, "lease_ms": lease_ms, "start": start, "wait_ms": wait_ms,
        }  # fmt: skip
        if capabilities is not None:
            body["capabilities"] = sorted(capabilities)
        if definitions is not None:
            body["definitions"] = sorted(definitions)
        # The server may hold the request for wait_ms: the client waits that much longer.
        document = self._ask(
            "POST", "/v1/batches/claims", body, timeout=self.timeout + wait_ms / 1000
        )
        return [
            ClaimedWork(WorkloadClaim.parse(item["claim"]), Workload.parse(item["workload"]))
            for item in document["items"]
        ]

    def complete_many(
        self, items: Sequence[CompletionLike]
    ) -> builtins.list[WorkloadResult | WorkloadError]:
        """See :meth:`WorkloadClient.complete_many` (``POST /v1/batches/completions``)."""
        body = {"items": [completion_item(item).fields() for item in items]}
        document = self._ask("POST", "/v1/batches/completions", body)
        return item_answers(document, "result", lambda i: WorkloadResult.parse(i["result"]))

    def renew_leases(
        self, items: Sequence[HeartbeatLike]
    ) -> builtins.list[LeaseRenewal | WorkloadError]:
        """See :meth:`WorkloadClient.renew_leases` (``POST /v1/batches/heartbeats``)."""
        body = {"items": [heartbeat_item(item).fields() for item in items]}
        document = self._ask("POST", "/v1/batches/heartbeats", body)
        return item_answers(
            document,
            "claim",
            lambda i: LeaseRenewal(
                WorkloadClaim.parse(i["claim"]), bool(i.get("cancellation_requested"))
            ),
        )
