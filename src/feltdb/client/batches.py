"""The items of the clients' batch calls, and how a batch answers per item.

A worker's batch item names the workload and the claim it acts under; the worker is the
client's identity, never an item's. Each item of a batch answers what the single call
answers: its value, or the :class:`~feltdb.errors.WorkloadError` the single call raises
(for :class:`~feltdb.client.Client`, a :class:`~feltdb.client.refusals.ClientError` with
the item's status).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import WorkloadClaim
from feltdb.work.inputs import DEFAULT_LEASE_MS


@dataclass(frozen=True, slots=True)
class CompletionItem:
    """One item of ``complete_many``: the arguments of ``complete``."""

    workload_id: str
    claim_id: str
    fencing_token: int
    result_id: str
    output: Any
    artifacts: Sequence[str] = ()
    schema_version: int = 1

    def fields(self) -> dict[str, Any]:
        """The item as the server's batch body holds it."""
        return {
            "workload_id": self.workload_id,
            "claim_id": self.claim_id,
            "fencing_token": self.fencing_token,
            "result_id": self.result_id,
            "output": self.output,
            "artifacts": list(self.artifacts),
            "schema_version": self.schema_version,
        }


@dataclass(frozen=True, slots=True)
class HeartbeatItem:
    """One item of ``heartbeat_many``: the arguments of ``heartbeat``."""

    workload_id: str
    claim_id: str
    fencing_token: int
    extend_ms: int = DEFAULT_LEASE_MS

    @classmethod
    def of(cls, claim: WorkloadClaim, extend_ms: int = DEFAULT_LEASE_MS) -> HeartbeatItem:
        """A heartbeat under ``claim``."""
        return cls(claim.workload_id, claim.claim_id, claim.fencing_token, extend_ms)

    def fields(self) -> dict[str, Any]:
        """The item as the server's batch body holds it."""
        return {
            "workload_id": self.workload_id,
            "claim_id": self.claim_id,
            "fencing_token": self.fencing_token,
            "extend_ms": self.extend_ms,
        }


CompletionLike = CompletionItem | Mapping[str, Any]
"""A :class:`CompletionItem`, or its fields as a mapping."""
HeartbeatLike = HeartbeatItem | Mapping[str, Any]
"""A :class:`HeartbeatItem`, or its fields as a mapping."""


def completion_item(value: CompletionLike) -> CompletionItem:
    """``value`` as a :class:`CompletionItem` (``WORKLOAD_INVALID`` for fields it lacks
    or does not have).
    """
    return value if isinstance(value, CompletionItem) else _record(CompletionItem, value)


def heartbeat_item(value: HeartbeatLike) -> HeartbeatItem:
    """``value`` as a :class:`HeartbeatItem` (``WORKLOAD_INVALID`` as above)."""
    return value if isinstance(value, HeartbeatItem) else _record(HeartbeatItem, value)


Record = TypeVar("Record")


def _record(kind: Callable[..., Record], fields: Mapping[str, Any]) -> Record:
    try:
        return kind(**fields)
    except TypeError as error:
        raise WorkloadError(ErrorCode.WORKLOAD_INVALID, f"not a batch item: {error}") from None
