"""Canonical storage: migration, provenance, document CAS and derived indexes, ported."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest
from support.factories import CAPABILITIES, make_request
from support.pinned import pinned_store
from support.rows import write_pre_versioned_row

import feltdb
from feltdb import (
    DURABLE_WORK_COLLECTION,
    WorkloadError,
    WorkloadState,
    WorkloadStore,
)
from feltdb.storage import RowIndex
from feltdb.work.identities import workload_id_for


def legacy_file_of(source: WorkloadStore) -> dict:
    """What a pre-requester-scope release wrote for ``source``'s work."""
    workloads = source.list("t", "app")
    return {
        "workloads": {w.workload_id: w.to_json() for w in workloads},
        "idempotency": {
            f"{w.tenant_id}:{w.application_id}:{w.idempotency_key}": w.workload_id
            for w in workloads
        },
        "result_ids": {w.result.result_id: w.workload_id for w in workloads if w.result},
        "event_sequence": max(
            (event.sequence for w in workloads for event in w.execution_history), default=0
        ),
    }


def test_legacy_migration_is_idempotent_conflict_detecting_and_source_independent(
    tmp_path: Path, new_target: Callable[[str], str], store
):
    source = store
    workload = source.create(make_request())
    legacy = legacy_file_of(source)
    legacy_path = tmp_path / "legacy-workloads.json"
    legacy_path.write_text(json.dumps(legacy))
    canonical_target = new_target("canonical")
    db = feltdb.open_database(canonical_target)
    try:
        migrated = WorkloadStore.migrate_legacy_file(db, legacy_path)
        assert migrated.get(workload.workload_id).input_hash == workload.input_hash
        WorkloadStore.migrate_legacy_file(db, legacy_path)
        legacy_path.unlink()
        with WorkloadStore.open(canonical_target) as reopened:
            assert reopened.get(workload.workload_id).workload_id == workload.workload_id

        conflicting = json.loads(json.dumps(legacy))
        conflicting["workloads"][workload.workload_id]["priority"] += 1
        legacy_path.write_text(json.dumps(conflicting))
        with pytest.raises(WorkloadError) as refused:
            WorkloadStore.migrate_legacy_file(db, legacy_path)
        assert refused.value.code == "WORKLOAD_MIGRATION_CONFLICT"
    finally:
        db.close()


def test_canonical_history_reconstructs_work_identity_provenance(store_target: str, open_store):
    with WorkloadStore.open(store_target) as store:
        workload = store.create(make_request())
        transaction = store.db.committed_transactions_after(0)[-1]
        audit = transaction.audit
        assert audit is not None
        assert audit["work_id"] == workload.workload_id
        assert audit["session_id"] == workload.session_id
        assert audit["agent_id"] == workload.requested_by.id
        assert audit["delegator_id"] == workload.authorization_snapshot.grant.issuer.id
        assert transaction.commit_revision > transaction.base_revision
        assert transaction.work_id == workload.workload_id
        assert transaction.agent_id == workload.requested_by.id
        assert transaction.session_id == workload.session_id
        assert transaction.delegator_id == workload.authorization_snapshot.grant.issuer.id
        assert len(transaction.operation_ids) == 1
        assert transaction.operation_ids[0] != transaction.transaction_id
    reopened = open_store()
    assert reopened.get(workload.workload_id).workload_id == workload.workload_id


def test_competing_writers_use_canonical_document_cas_before_and_after_restart(
    store_target: str,
):
    with ExitStack() as stack:
        seed = stack.enter_context(WorkloadStore.open(store_target))
        workload = seed.create(make_request())
        workload_id = workload.workload_id

        winner = stack.enter_context(WorkloadStore.open(store_target))
        # The loser's claim races the winner's inside the window between its read
        # and its commit, which only the storage guard closes.
        loser = pinned_store(stack.enter_context(WorkloadStore.open(store_target)))
        winner.claim(workload_id, "worker-a", CAPABILITIES, now=11, lease_ms=1_000)
        with pytest.raises(WorkloadError) as conflict:
            loser.claim(workload_id, "worker-b", CAPABILITIES, now=11, lease_ms=1_000)
        assert conflict.value.code == "WORKLOAD_CONFLICT"
        # The loser committed nothing and now reads the winner's claim.
        projected = loser.get(workload_id)
        assert projected.state == WorkloadState.CLAIMED
        assert projected.current_claim is not None
        assert projected.current_claim.worker_id == "worker-a"

        row = seed.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
        assert row is not None
        assert row.version == 2
        assert row.document["__version"] == 2

    with ExitStack() as stack:
        recovery = stack.enter_context(WorkloadStore.open(store_target))
        recovery.recover_expired(now=13)
        restarted_winner = stack.enter_context(WorkloadStore.open(store_target))
        restarted_loser = pinned_store(stack.enter_context(WorkloadStore.open(store_target)))
        restarted_winner.claim(workload_id, "worker-c", CAPABILITIES, now=13, lease_ms=10_000)
        with pytest.raises(WorkloadError) as conflict:
            restarted_loser.claim(workload_id, "worker-d", CAPABILITIES, now=13, lease_ms=10_000)
        assert conflict.value.code == "WORKLOAD_CONFLICT"
        projected = restarted_loser.get(workload_id)
        assert projected.state == WorkloadState.CLAIMED
        assert projected.current_claim is not None
        assert projected.current_claim.worker_id == "worker-c"


def test_pre_versioned_canonical_rows_upgrade_through_the_standard_cas_contract(store, open_store):
    workload = store.create(make_request())
    db = store.db
    # An older release's row: the document with no "__version", written unguarded.
    write_pre_versioned_row(db, DURABLE_WORK_COLLECTION, workload.workload_id, workload.to_json())
    row = db.get_row(DURABLE_WORK_COLLECTION, workload.workload_id)
    assert row is not None
    assert row.version == 1, "a pre-versioned document reads as version 1"

    upgraded = open_store()
    upgraded.claim(workload.workload_id, "worker", CAPABILITIES, now=11, lease_ms=10_000)
    row = db.get_row(DURABLE_WORK_COLLECTION, workload.workload_id)
    assert row is not None
    assert row.version == 2
    assert row.document["__version"] == 2


def test_derived_indexes_rebuild_exclusively_from_canonical_work(store, open_store):
    workload = store.create(make_request())
    claim = store.claim(workload.workload_id, "worker", CAPABILITIES, now=11, lease_ms=10_000)
    store.start(workload.workload_id, claim.claim_id, "worker", claim.fencing_token, now=12)
    store.complete(
        workload.workload_id,
        claim.claim_id,
        "worker",
        claim.fencing_token,
        "result-rebuilt",
        {"ok": True},
        [],
        1,
        now=13,
    )
    # A second, claimable workload, so the scheduling index is shown to be rebuilt too.
    waiting = store.create(make_request(idempotency_key="waiting"))

    # Clear every derived index: nothing that needs them finds the work any more.
    for workload_id in (workload.workload_id, waiting.workload_id):
        assert store.db.update_index(DURABLE_WORK_COLLECTION, workload_id, RowIndex())
    assert store.unit.result_owner("result-rebuilt", waiting) is None
    assert store.claim_next("t", "app", "worker", CAPABILITIES, now=14, lease_ms=10_000) is None

    # Rebuilt from the canonical documents alone.
    assert store.rebuild_indexes() == 2
    rebuilt = open_store()
    # The idempotency identity is the workload id itself.
    assert workload_id_for("t", "app", workload.requested_by, "one") == workload.workload_id
    assert rebuilt.get(workload_id_for("t", "app", workload.requested_by, "one")).workload_id == (
        workload.workload_id
    )
    assert rebuilt.unit.result_owner("result-rebuilt", waiting) == workload.workload_id
    row = rebuilt.db.get_row(DURABLE_WORK_COLLECTION, workload.workload_id)
    assert row is not None
    assert row.version > 1
    assert [event.sequence for event in rebuilt.get(workload.workload_id).execution_history] == [
        1,
        2,
        3,
        4,
    ]
    duplicate = open_store().create(make_request())
    assert duplicate.workload_id == workload.workload_id
    next_claim = rebuilt.claim_next("t", "app", "worker", CAPABILITIES, now=14, lease_ms=10_000)
    assert next_claim is not None
    assert next_claim.workload_id == waiting.workload_id
