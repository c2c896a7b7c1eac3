"""Deterministic identities, so that two writers (or two implementations) agree on them."""

from __future__ import annotations

from feltdb.auth import Subject
from feltdb.storage.canonical import float_free_json, sha256_hex


def idempotency_scope(
    tenant_id: str, application_id: str, requester: Subject, idempotency_key: str
) -> str:
    """The identity an idempotency key is unique within: tenant, application and requester.

    Encoded as a JSON array, so no choice of key or identifier can make two scopes coincide.
    """
    return float_free_json(
        [tenant_id, application_id, requester.kind.value, requester.id, idempotency_key]
    )


def legacy_idempotency_scope(tenant_id: str, application_id: str, idempotency_key: str) -> str:
    """The scope before keys were bound to their requester; only for verifying legacy files."""
    return f"{tenant_id}:{application_id}:{idempotency_key}"


def workload_id_for(
    tenant_id: str, application_id: str, requester: Subject, idempotency_key: str
) -> str:
    """The workload id of an admission: its idempotency scope is its identity.

    Competing admissions therefore contend on one require-absent compare-and-set even when
    their payloads differ; no separate uniqueness index is needed.
    """
    scope = idempotency_scope(tenant_id, application_id, requester, idempotency_key)
    return "workload_" + sha256_hex(scope)[:24]


def claim_id_for(workload_id: str, fencing_token: int, worker: str) -> str:
    """The id of the claim that ``worker`` holds under ``fencing_token``."""
    return "claim_" + sha256_hex(f"{workload_id}:{fencing_token}:{worker}")[:20]


def lease_id_for(fencing_token: int) -> str:
    """The id of the lease under ``fencing_token``."""
    return f"lease_{fencing_token}"


def attempt_id_for(workload_id: str, attempt_count: int) -> str:
    """The id of a workload's ``attempt_count``-th attempt."""
    return f"attempt_{workload_id}_{attempt_count}"


def checkpoint_id_for(workload_id: str, sequence: int) -> str:
    """The id of a workload's ``sequence``-th checkpoint."""
    return f"checkpoint_{workload_id}_{sequence}"
