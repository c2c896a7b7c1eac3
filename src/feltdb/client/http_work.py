"""The HTTP clients' calls of requesters, operators and approvers, over ``/v1``, written
once for :class:`~feltdb.client.Client` and :class:`~feltdb.client.AsyncClient` (see
:mod:`feltdb.client.calls`).

The caller's identity is its bearer token, so no call takes a requester, decider or
tenant: the server takes them from the verified grant.
"""

from __future__ import annotations

import builtins
from typing import Any
from urllib.parse import quote

from feltdb.client.calls import Request, Steps, ask, operation, shaped_as
from feltdb.client.protocol import (
    Page,
    SubmissionLike,
    WorkloadClient,
    admission_fields,
    as_submission,
)
from feltdb.client.refusals import ClientError
from feltdb.errors import WorkloadError
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import ApprovalDecision, Workload
from feltdb.tracing import with_trace_context
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.submission import submission_fields


def workload_path(workload_id: str, action: str | None = None) -> str:
    """The path of a workload (or of an ``action`` on it)."""
    # A workload id is one path segment: "/", "?" or "#" in it must not become structure.
    base = f"/v1/workloads/{quote(workload_id, safe='')}"
    return f"{base}/{action}" if action else base


def submitting(submission: SubmissionLike) -> Steps[tuple[Workload, bool]]:
    """``POST /v1/workloads``: the workload, and whether this request created it.

    Raises:
        ClientError: ``WORKLOAD_INVALID`` (status ``None``) before anything is sent, for
            fields the submission model refuses.
    """
    try:
        body = with_trace_context(submission_fields(as_submission(submission)))
    except WorkloadError as error:
        raise ClientError(error.code, error.message, error.details) from None
    answer = yield Request("POST", "/v1/workloads", body)
    assert answer.document is not None
    workload: Workload = Workload.parse(answer.document)
    return workload, answer.status == 201


def paging(path: str, query: dict[str, Any], cursor: str | None) -> Steps[Page]:
    """One page of ``path``'s summaries."""
    if cursor is not None:
        query["cursor"] = cursor
    answer = yield from ask("GET", path, params=query)
    return Page([WorkloadSummary.parse(item) for item in answer["items"]], answer["next_cursor"])


class HttpWork:
    """The calls of requesters, operators and approvers."""

    @operation
    def submit(self, submission: SubmissionLike) -> Steps[tuple[Workload, bool]]:
        """Admit a workload, or answer with the one this token's subject already admitted
        under its ``idempotency_key``; ``True`` when this call created it.

        The body is the submission's fields as given (see
        :data:`~feltdb.work.submission.Submission`); the server takes the tenant, the
        application, the requester and its grant from the token, and ``created_at`` from
        its clock.

        Raises:
            ClientError: ``WORKLOAD_INVALID`` (status ``None``) before anything is sent, for
                fields the submission model refuses; else the server's refusal.
        """
        return (yield from submitting(submission))

    @operation
    @shaped_as(WorkloadClient.admit)
    def admit(self, **fields: Any) -> Steps[tuple[Workload, bool]]:
        """See :meth:`WorkloadClient.admit` (whose parameters and docstring these are)."""
        return (yield from submitting(admission_fields(**fields)))

    @operation
    def create(self, /, **fields: Any) -> Steps[Workload]:
        """:meth:`admit` (same keyword fields), answering only the workload."""
        workload, _ = yield from submitting(admission_fields(**fields))
        return workload

    @operation
    def get(self, workload_id: str) -> Steps[Workload]:
        """The committed workload.

        Raises:
            ClientError: ``WORKLOAD_NOT_FOUND`` (also for another tenant's or
                application's work).
        """
        workload: Workload = Workload.parse((yield from ask("GET", workload_path(workload_id))))
        return workload

    @operation
    def cancel(self, workload_id: str) -> Steps[WorkloadState]:
        """Cancel ready work, or request cancellation of running work; the new state."""
        answer = yield from ask("POST", workload_path(workload_id, "cancel"))
        return WorkloadState(answer["state"])

    @operation
    def list(
        self,
        *,
        state: WorkloadState | str | None = None,
        definition: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Steps[Page]:
        """A page of the token's application's workloads, priority descending then oldest
        first; ``cursor`` is the previous page's ``next_cursor``.
        """
        query: dict[str, Any] = {"limit": limit}
        if state is not None:
            query["state"] = str(state)
        if definition is not None:
            query["definition"] = definition
        return (yield from paging("/v1/workloads", query, cursor))

    @operation
    def approvals(self, *, limit: int = 50, cursor: str | None = None) -> Steps[Page]:
        """A page of the work awaiting approval (needs ``workload:approve``)."""
        return (yield from paging("/v1/approvals", {"limit": limit}, cursor))

    @operation
    def dead_letters(self, *, limit: int = 50, cursor: str | None = None) -> Steps[Page]:
        """A page of the dead-lettered work (needs ``workload:operate``)."""
        return (yield from paging("/v1/dead-letters", {"limit": limit}, cursor))

    @operation
    def revocations(self) -> Steps[builtins.list[dict[str, Any]]]:
        """The grants revoked in the token's tenant and application, oldest first
        (``grant_id``, ``revoked_by``, ``revoked_at``; needs ``grant:revoke``).
        """
        items: builtins.list[dict[str, Any]] = (yield from ask("GET", "/v1/grants/revocations"))[
            "items"
        ]
        return items

    @operation
    def revoke_grant(self, grant_id: str, *, force: bool = False) -> Steps[bool]:
        """Revoke a grant of the token's tenant and application: refused from the next
        request on. ``False`` when it already was revoked (needs ``grant:revoke``); an id
        feltdb never minted only with ``force``.
        """
        path = f"/v1/grants/{quote(grant_id, safe='')}/revoke"
        answer = yield from ask("POST", path, {"force": True} if force else None)
        return bool(answer["revoked"])

    @operation
    def retry(self, workload_id: str, reason: str | None = None) -> Steps[Workload]:
        """Re-arm failed or dead-lettered work; the workload as re-armed (the store's
        ``retry`` answers nothing; the server answers the workload, passed on here).
        """
        body = {"reason": reason} if reason is not None else {}
        answer = yield from ask("POST", workload_path(workload_id, "retry"), body)
        workload: Workload = Workload.parse(answer)
        return workload

    @operation
    def decide(
        self,
        workload_id: str,
        outcome: ApprovalOutcome | str,
        reason: str | None,
        input_hash: str,
    ) -> Steps[tuple[ApprovalDecision, bool]]:
        """Approve or reject, bound to the input the decider reviewed; the decision and
        whether it replays one already committed. The decider is the token's subject.
        """
        body = {"outcome": str(outcome), "reason": reason, "input_hash": input_hash}
        answer = yield from ask("POST", workload_path(workload_id, "decision"), body)
        decision: ApprovalDecision = ApprovalDecision.parse(answer["decision"])
        return decision, bool(answer["replayed"])
