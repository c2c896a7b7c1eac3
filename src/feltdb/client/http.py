"""The HTTP client: :class:`~feltdb.work.store.WorkloadStore`'s operations over ``/v1``.

The caller's identity is its bearer token, so no method takes a requester, worker, decider
or tenant: the server takes them from the verified grant. Answers are the library's own
records, parsed from the server's JSON; refusals :class:`~feltdb.client.refusals.ClientError`
(the server's code, message, details and HTTP status).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from feltdb.auth.tokens import decode_token
from feltdb.client.http_audit import HttpAudit
from feltdb.client.http_batches import HttpBatches
from feltdb.client.http_schedules import HttpSchedules
from feltdb.client.limits import HttpLimits
from feltdb.client.protocol import AuditPage, Page, SubmissionLike, WorkloadClient, as_submission
from feltdb.client.refusals import ClientError, refusal, server_url, unanswered
from feltdb.client.retention import HttpRetention
from feltdb.client.workflows import HttpWorkflows
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import (
    ApprovalDecision,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.tracing import inject_headers, with_trace_context
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.submission import submission_fields

if TYPE_CHECKING:
    from feltdb.auth import Subject

__all__ = ["AuditPage", "Client", "ClientError", "Page", "server_url"]


def _fence(claim_id: str, fencing_token: int) -> dict[str, Any]:
    return {"claim_id": claim_id, "fencing_token": fencing_token}


class Client(
    HttpAudit, HttpBatches, HttpLimits, HttpRetention, HttpSchedules, HttpWorkflows, WorkloadClient
):
    """A client of a feltdb server at ``url``, acting as the grant ``token`` carries.

    ``timeout`` bounds each request in seconds (a long-poll's ``wait_ms`` is added to it).
    Use it as a context manager, or call :meth:`close`. One client may be shared by the
    threads of a process (it holds an :class:`httpx.Client` connection pool).

    Example:
        >>> with Client("http://127.0.0.1:8700", token) as felt:  # doctest: +SKIP
        ...     workload, created = felt.admit(
        ...         environment="production", definition_id="send", definition_revision="r1",
        ...         trigger="manual", input={"to": "ada@example.com"},
        ...         capability_snapshot=["email:send"], idempotency_key="one")
    """

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        """Talk to the server at ``url`` (its root: ``http://host:port``) with ``token``.

        Raises:
            ClientError: ``WORKLOAD_INVALID`` for a URL that is not an ``http``/``https``
                URL with a host and a valid port.
        """
        self.url = server_url(url)
        self.timeout = timeout
        self._token = token
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def use_token(self, token: str) -> None:
        """Send ``token`` from the next request on (a rotated token)."""
        headers = self._http.headers.copy()
        headers["Authorization"] = f"Bearer {token}"
        self._http.headers = headers  # whole: another thread's request takes one or the other
        self._token = token

    @property
    def subject(self) -> Subject:
        """The subject of the token's grant, read from the token (the server verifies it).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a token that is not one.
        """
        subject: Subject = decode_token(self._token).grant.subject
        return subject

    # -------------------------------------------------------------- transport

    def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        where = f"{self.url}{path}"
        try:
            content = None if body is None else json.dumps(body, allow_nan=False)
        except (ValueError, TypeError) as error:
            raise ClientError(
                ErrorCode.WORKLOAD_INVALID,
                f"the request is not JSON (NaN, infinity and non-JSON types are not): {error}",
            ) from None
        headers = inject_headers({"Content-Type": "application/json"} if content else {})
        try:
            answer = self._http.request(
                method,
                path,
                content=content,
                headers=headers,
                params=params,
                timeout=timeout if timeout is not None else self.timeout,
            )
        except httpx.TransportError as error:
            raise unanswered(error, self.url, where) from error
        if answer.is_success:
            return answer
        raise refusal(answer, where)

    def _ask(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        answer = self._send(method, path, body, params=params, timeout=timeout)
        return self._document(answer, path)

    def _document(self, answer: httpx.Response, path: str) -> dict[str, Any]:
        """The JSON object a successful ``answer`` carries; anything else is a
        ``WORKLOAD_STORAGE_FAILURE`` naming the URL and status.
        """
        try:
            document = answer.json()
        except ValueError:
            document = None
        if not isinstance(document, dict):
            raise ClientError(
                ErrorCode.WORKLOAD_STORAGE_FAILURE,
                f"the feltdb server at {self.url}{path} answered {answer.status_code} "
                "with a body that is not a JSON object",
                {"url": f"{self.url}{path}", "status": answer.status_code, "code": None},
                status=answer.status_code,
            )
        return document

    @staticmethod
    def _path(workload_id: str, action: str | None = None) -> str:
        # A workload id is one path segment: "/", "?" or "#" in it must not become structure.
        base = f"/v1/workloads/{quote(workload_id, safe='')}"
        return f"{base}/{action}" if action else base

    # -------------------------------------------------------------- requesters

    def submit(self, submission: SubmissionLike) -> tuple[Workload, bool]:
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
        try:
            body = with_trace_context(submission_fields(as_submission(submission)))
        except WorkloadError as error:
            raise ClientError(error.code, error.message, error.details) from None
        answer = self._send("POST", "/v1/workloads", body)
        workload: Workload = Workload.parse(self._document(answer, "/v1/workloads"))
        return workload, answer.status_code == 201

    def get(self, workload_id: str) -> Workload:
        """The committed workload.

        Raises:
            ClientError: ``WORKLOAD_NOT_FOUND`` (also for another tenant's or
                application's work).
        """
        workload: Workload = Workload.parse(self._ask("GET", self._path(workload_id)))
        return workload

    def cancel(self, workload_id: str) -> WorkloadState:
        """Cancel ready work, or request cancellation of running work; the new state."""
        answer = self._ask("POST", self._path(workload_id, "cancel"))
        return WorkloadState(answer["state"])

    def list(
        self,
        *,
        state: WorkloadState | str | None = None,
        definition: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """A page of the token's application's workloads, priority descending then oldest
        first; ``cursor`` is the previous page's ``next_cursor``.
        """
        query: dict[str, Any] = {"limit": limit}
        if state is not None:
            query["state"] = str(state)
        if definition is not None:
            query["definition"] = definition
        return self._page("/v1/workloads", query, cursor)

    def approvals(self, *, limit: int = 50, cursor: str | None = None) -> Page:
        """A page of the work awaiting approval (needs ``workload:approve``)."""
        return self._page("/v1/approvals", {"limit": limit}, cursor)

    def dead_letters(self, *, limit: int = 50, cursor: str | None = None) -> Page:
        """A page of the dead-lettered work (needs ``workload:operate``)."""
        return self._page("/v1/dead-letters", {"limit": limit}, cursor)

    def _page(self, path: str, query: dict[str, Any], cursor: str | None) -> Page:
        if cursor is not None:
            query["cursor"] = cursor
        answer = self._ask("GET", path, params=query)
        items = [WorkloadSummary.parse(item) for item in answer["items"]]
        return Page(items, answer["next_cursor"])

    def revocations(self) -> builtins.list[dict[str, Any]]:
        """The grants revoked in the token's tenant and application, oldest first
        (``grant_id``, ``revoked_by``, ``revoked_at``; needs ``grant:revoke``).
        """
        items: builtins.list[dict[str, Any]] = self._ask("GET", "/v1/grants/revocations")["items"]
        return items

    def revoke_grant(self, grant_id: str, *, force: bool = False) -> bool:
        """Revoke a grant of the token's tenant and application: refused from the next
        request on. ``False`` when it already was revoked (needs ``grant:revoke``); an id
        feltdb never minted only with ``force``.
        """
        path = f"/v1/grants/{quote(grant_id, safe='')}/revoke"
        answer = self._ask("POST", path, {"force": True} if force else None)
        return bool(answer["revoked"])

    # -------------------------------------------------------------- workers

    def claim_next(
        self,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
    ) -> WorkloadClaim | None:
        """Claim the next eligible workload of the token's application that this token's
        capabilities can run; ``None`` when there is none.

        With ``wait_ms`` (at most 30 000) the server long-polls: it answers as soon as
        work becomes claimable, or ``None`` once ``wait_ms`` has passed. ``capabilities``
        narrows the token's: only work they cover is claimed. ``definitions`` (``None``:
        any) claims only work of those definition ids, the ones this worker serves.
        """
        body: dict[str, Any] = {"lease_ms": lease_ms, "wait_ms": wait_ms}
        if capabilities is not None:
            body["capabilities"] = sorted(capabilities)
        if definitions is not None:
            body["definitions"] = sorted(definitions)
        answer = self._send(
            "POST",
            "/v1/claims",
            body,
            timeout=self.timeout + wait_ms / 1000,
        )
        if answer.status_code == 204:
            return None
        claim: WorkloadClaim = WorkloadClaim.parse(self._document(answer, "/v1/claims"))
        return claim

    def claim(self, workload_id: str, *, lease_ms: int = DEFAULT_LEASE_MS) -> WorkloadClaim:
        """Claim a given ready workload under a fresh fencing token."""
        answer = self._ask("POST", self._path(workload_id, "claim"), {"lease_ms": lease_ms})
        claim: WorkloadClaim = WorkloadClaim.parse(answer)
        return claim

    def start(self, workload_id: str, claim_id: str, fencing_token: int) -> None:
        """Start the claimed attempt."""
        self._send("POST", self._path(workload_id, "start"), _fence(claim_id, fencing_token))

    def heartbeat(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        *,
        extend_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:
        """Extend the lease by ``extend_ms`` from now; the extended claim."""
        body = {**_fence(claim_id, fencing_token), "extend_ms": extend_ms}
        claim: WorkloadClaim = WorkloadClaim.parse(
            self._ask("POST", self._path(workload_id, "heartbeat"), body)
        )
        return claim

    def execution_context(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        secret_references: Iterable[str] = (),
    ) -> WorkloadExecutionContext:
        """What the claiming worker needs: input, scopes and every committed checkpoint."""
        body = {**_fence(claim_id, fencing_token), "secret_references": list(secret_references)}
        found: WorkloadExecutionContext = WorkloadExecutionContext.parse(
            self._ask("POST", self._path(workload_id, "context"), body)
        )
        return found

    def checkpoint(
        self, workload_id: str, claim_id: str, fencing_token: int, state: Any
    ) -> WorkloadCheckpoint:
        """Commit progress of the attempt."""
        body = {**_fence(claim_id, fencing_token), "state": state}
        saved: WorkloadCheckpoint = WorkloadCheckpoint.parse(
            self._ask("POST", self._path(workload_id, "checkpoint"), body)
        )
        return saved

    def complete(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        result_id: str,
        output: Any,
        artifacts: Iterable[str] = (),
        schema_version: int = 1,
    ) -> WorkloadResult:
        """Record the result; the same report repeated answers the recorded result."""
        body = {
            **_fence(claim_id, fencing_token),
            "result_id": result_id,
            "output": output,
            "artifacts": list(artifacts),
            "schema_version": schema_version,
        }
        result: WorkloadResult = WorkloadResult.parse(
            self._ask("POST", self._path(workload_id, "complete"), body)
        )
        return result

    def fail(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        kind: str,
        error: str,
        *,
        effect: str | None = None,
    ) -> WorkloadState:
        """Report the attempt failed; the state it led to (``READY`` for a retry,
        ``DEAD_LETTER``, …). ``effect``: ``"none"`` or ``"unknown"``.
        """
        body = {**_fence(claim_id, fencing_token), "kind": kind, "error": error}
        if effect is not None:
            body["effect"] = effect
        answer = self._ask("POST", self._path(workload_id, "fail"), body)
        return WorkloadState(answer["state"])

    def confirm_cancel(self, workload_id: str, claim_id: str, fencing_token: int) -> None:
        """Confirm a requested cancellation of the claimed work."""
        self._send(
            "POST", self._path(workload_id, "confirm-cancel"), _fence(claim_id, fencing_token)
        )

    # -------------------------------------------------------------- operators and approvers

    def retry(self, workload_id: str, reason: str | None = None) -> Workload:
        """Re-arm failed or dead-lettered work; the workload as re-armed (the store's
        ``retry`` answers nothing; the server answers the workload, passed on here).
        """
        body = {"reason": reason} if reason is not None else {}
        answer = self._ask("POST", self._path(workload_id, "retry"), body)
        workload: Workload = Workload.parse(answer)
        return workload

    def decide(
        self,
        workload_id: str,
        outcome: ApprovalOutcome | str,
        reason: str | None,
        input_hash: str,
    ) -> tuple[ApprovalDecision, bool]:
        """Approve or reject, bound to the input the decider reviewed; the decision and
        whether it replays one already committed. The decider is the token's subject.
        """
        body = {"outcome": str(outcome), "reason": reason, "input_hash": input_hash}
        answer = self._ask("POST", self._path(workload_id, "decision"), body)
        decision: ApprovalDecision = ApprovalDecision.parse(answer["decision"])
        return decision, bool(answer["replayed"])
