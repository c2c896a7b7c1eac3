"""A workload's stored text: made once per commit, hashed by the audit record as stored,
read back by validating the text itself; corrupt rows and older stores' text, on every
backend.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import DURABLE_WORK_COLLECTION, WorkloadError, WorkloadStore
from feltdb.errors import ErrorCode
from feltdb.storage import Mutation, Precondition
from feltdb.storage.canonical import canonical_json, content_hash
from feltdb.work.rows import planned_commit, workload_of
from feltdb.work.scheduling import row_index


@pytest.fixture
def store(new_target: Any) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(new_target()) as opened:
        yield opened


def stored_text(store: WorkloadStore, workload_id: str) -> str:
    row = store.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
    assert row is not None and row.text is not None
    return row.text


def replace_text(store: WorkloadStore, workload_id: str, text: str) -> None:
    """Store ``text`` as the workload's document, as it is (a corrupt or an older row)."""
    row = store.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
    assert row is not None
    index = row_index(workload_of(row))
    guard = Precondition(DURABLE_WORK_COLLECTION, workload_id, expected_version=row.version)
    store.db.commit(
        "plant", [Mutation(DURABLE_WORK_COLLECTION, workload_id, {}, index, text)], [guard]
    )


def test_each_commit_s_source_digest_is_the_sha256_of_the_text_it_stored(
    store: WorkloadStore,
) -> None:
    w, _ = store.admit(make_request(input={"small": 1e-05, "big": 2**70, "text": "é\u2028"}))
    texts = [stored_text(store, w.workload_id)]
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None
    texts.append(stored_text(store, w.workload_id))
    store.start(w.workload_id, claim.claim_id, "w", claim.fencing_token, now=12)
    texts.append(stored_text(store, w.workload_id))
    store.complete(w.workload_id, claim.claim_id, "w", claim.fencing_token, "r", {"x": 0.5}, now=13)
    texts.append(stored_text(store, w.workload_id))
    digests = [
        entry.audit["source_digest"]
        for entry in store.db.committed_transactions_after(0)
        if entry.audit is not None and entry.audit.get("work_id") == w.workload_id
    ]
    assert digests == [hashlib.sha256(text.encode()).hexdigest() for text in texts]
    # The stored text is the document's canonical JSON, byte for byte, as it always was.
    final = store.get(w.workload_id)
    assert texts[-1] == canonical_json(final.to_json())
    assert digests[-1] == content_hash(final.to_json())
    assert final.input == {"small": 1e-05, "big": 2**70, "text": "é\u2028"}


def test_what_a_commit_answers_carries_the_stored_text(store: WorkloadStore) -> None:
    w, _ = store.admit(make_request())
    plan = planned_commit(store.get(w.workload_id), "fixture", 1)
    [mutation] = plan.mutations
    assert mutation.document is None  # the text alone is carried, not a dict beside it
    assert mutation.encoded == canonical_json(store.get(w.workload_id).to_json())
    assert plan.audit is not None
    assert plan.audit["source_digest"] == hashlib.sha256(mutation.encoded.encode()).hexdigest()
    commit = store.db.commit(plan.operation_id, plan.mutations, plan.preconditions, plan.audit)
    [row] = commit.rows
    assert row.text == mutation.encoded == stored_text(store, w.workload_id)
    assert row.document == {**json.loads(mutation.encoded), "__version": 2}
    assert workload_of(row) == store.get(w.workload_id)


@pytest.mark.parametrize(
    "text",
    ["not json", "[1, 2]", "5", '{"state": "READY"}', '{"workload_id": 1}', ""],
    ids=["not-json", "array", "number", "not-a-workload", "wrong-type", "empty"],
)
def test_a_corrupt_row_is_a_storage_failure(store: WorkloadStore, text: str) -> None:
    w, _ = store.admit(make_request())
    replace_text(store, w.workload_id, text)
    with pytest.raises(WorkloadError) as raised:
        store.get(w.workload_id)
    assert raised.value.code == ErrorCode.WORKLOAD_STORAGE_FAILURE
    assert w.workload_id in raised.value.message
    row = store.db.get_row(DURABLE_WORK_COLLECTION, w.workload_id)
    assert row is not None
    if text in ("not json", "[1, 2]", "5", ""):  # and its document is one too
        with pytest.raises(WorkloadError) as decoded:
            _ = row.document
        assert decoded.value.code == ErrorCode.WORKLOAD_STORAGE_FAILURE


def test_a_document_an_older_release_wrote_with_the_standard_library_still_reads(
    store: WorkloadStore,
) -> None:
    w, _ = store.admit(make_request(input={"n": 1, "f": 0.25}))
    document = w.to_json()
    # Unsorted keys, the default separators (with spaces), non-ASCII escaped.
    older = json.dumps(dict(reversed(list(document.items()))), ensure_ascii=True)
    replace_text(store, w.workload_id, older)
    assert store.get(w.workload_id) == w
    row = store.db.get_row(DURABLE_WORK_COLLECTION, w.workload_id)
    assert row is not None
    assert row.document == {**document, "__version": 2}
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None and claim.workload_id == w.workload_id
    assert stored_text(store, w.workload_id) == canonical_json(store.get(w.workload_id).to_json())


def test_a_document_without_the_fields_added_since_reads_with_what_their_absence_meant(
    store: WorkloadStore,
) -> None:
    w, _ = store.admit(make_request(session_id=None))
    document = w.to_json()
    assert document["session_id"] is None and document["dependencies"] == []
    older = {k: v for k, v in document.items() if k not in ("session_id", "dependencies")}
    del older["timeouts"]["approval_ms"]
    replace_text(store, w.workload_id, canonical_json(older))
    assert store.get(w.workload_id) == w
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None and claim.workload_id == w.workload_id
    rewritten = json.loads(stored_text(store, w.workload_id))
    assert rewritten["session_id"] is None and rewritten["dependencies"] == []
    assert rewritten["timeouts"]["approval_ms"] is None


def test_a_stored_document_missing_a_required_field_is_a_storage_failure(
    store: WorkloadStore,
) -> None:
    w, _ = store.admit(make_request())
    document = w.to_json()
    del document["state"]
    replace_text(store, w.workload_id, canonical_json(document))
    with pytest.raises(WorkloadError) as raised:
        store.get(w.workload_id)
    assert raised.value.code == ErrorCode.WORKLOAD_STORAGE_FAILURE
    assert "state" in raised.value.message
