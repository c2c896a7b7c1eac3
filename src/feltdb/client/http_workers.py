"""The HTTP clients' calls of a worker (one workload at a time), over ``/v1``, written once
for :class:`~feltdb.client.Client` and :class:`~feltdb.client.AsyncClient` (see
:mod:`feltdb.client.calls`); the worker is the token's subject.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from feltdb.client.calls import Request, Steps, ask, operation, send
from feltdb.client.http_work import workload_path
from feltdb.records.workload import (
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.states import WorkloadState


def _fence(claim_id: str, fencing_token: int) -> dict[str, Any]:
    return {"claim_id": claim_id, "fencing_token": fencing_token}


class HttpWorkers:
    """A worker's calls on one workload."""

    @operation
    def claim_next(
        self,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
    ) -> Steps[WorkloadClaim | None]:
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
        answer = yield Request("POST", "/v1/claims", body, wait_ms=wait_ms, none_on_204=True)
        if answer.document is None:
            return None
        claim: WorkloadClaim = WorkloadClaim.parse(answer.document)
        return claim

    @operation
    def claim(self, workload_id: str, *, lease_ms: int = DEFAULT_LEASE_MS) -> Steps[WorkloadClaim]:
        """Claim a given ready workload under a fresh fencing token."""
        path = workload_path(workload_id, "claim")
        claim: WorkloadClaim = WorkloadClaim.parse(
            (yield from ask("POST", path, {"lease_ms": lease_ms}))
        )
        return claim

    @operation
    def start(self, workload_id: str, claim_id: str, fencing_token: int) -> Steps[None]:
        """Start the claimed attempt."""
        yield from send(
            "POST", workload_path(workload_id, "start"), _fence(claim_id, fencing_token)
        )

    @operation
    def heartbeat(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        *,
        extend_ms: int = DEFAULT_LEASE_MS,
    ) -> Steps[WorkloadClaim]:
        """Extend the lease by ``extend_ms`` from now; the extended claim."""
        body = {**_fence(claim_id, fencing_token), "extend_ms": extend_ms}
        answer = yield from ask("POST", workload_path(workload_id, "heartbeat"), body)
        claim: WorkloadClaim = WorkloadClaim.parse(answer)
        return claim

    @operation
    def execution_context(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        secret_references: Iterable[str] = (),
    ) -> Steps[WorkloadExecutionContext]:
        """What the claiming worker needs: input, scopes and every committed checkpoint."""
        body = {**_fence(claim_id, fencing_token), "secret_references": list(secret_references)}
        answer = yield from ask("POST", workload_path(workload_id, "context"), body)
        found: WorkloadExecutionContext = WorkloadExecutionContext.parse(answer)
        return found

    @operation
    def checkpoint(
        self, workload_id: str, claim_id: str, fencing_token: int, state: Any
    ) -> Steps[WorkloadCheckpoint]:
        """Commit progress of the attempt."""
        body = {**_fence(claim_id, fencing_token), "state": state}
        answer = yield from ask("POST", workload_path(workload_id, "checkpoint"), body)
        saved: WorkloadCheckpoint = WorkloadCheckpoint.parse(answer)
        return saved

    @operation
    def complete(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        result_id: str,
        output: Any,
        artifacts: Iterable[str] = (),
        schema_version: int = 1,
    ) -> Steps[WorkloadResult]:
        """Record the result; the same report repeated answers the recorded result."""
        body = {
            **_fence(claim_id, fencing_token),
            "result_id": result_id,
            "output": output,
            "artifacts": list(artifacts),
            "schema_version": schema_version,
        }
        answer = yield from ask("POST", workload_path(workload_id, "complete"), body)
        result: WorkloadResult = WorkloadResult.parse(answer)
        return result

    @operation
    def fail(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        kind: str,
        error: str,
        *,
        effect: str | None = None,
    ) -> Steps[WorkloadState]:
        """Report the attempt failed; the state it led to (``READY`` for a retry,
        ``DEAD_LETTER``, …). ``effect``: ``"none"`` or ``"unknown"``.
        """
        body = {**_fence(claim_id, fencing_token), "kind": kind, "error": error}
        if effect is not None:
            body["effect"] = effect
        answer = yield from ask("POST", workload_path(workload_id, "fail"), body)
        return WorkloadState(answer["state"])

    @operation
    def confirm_cancel(self, workload_id: str, claim_id: str, fencing_token: int) -> Steps[None]:
        """Confirm a requested cancellation of the claimed work."""
        path = workload_path(workload_id, "confirm-cancel")
        yield from send("POST", path, _fence(claim_id, fencing_token))
