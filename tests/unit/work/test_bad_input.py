"""Bad input gets a clear error and changes nothing.

Every malformed request or call is refused with ``WORKLOAD_INVALID`` (or
``WORKLOAD_NOT_FOUND``) naming the offending field, and commits nothing: the store's
revision and every document version stay where they were.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import (
    DURABLE_WORK_COLLECTION,
    CreateWorkload,
    WorkloadClaim,
    WorkloadError,
    WorkloadStore,
)

REQUIRED = [
    "tenant_id",
    "application_id",
    "environment",
    "definition_id",
    "definition_revision",
    "trigger",
    "input",
    "requested_by",
    "authorization_snapshot",
    "capability_snapshot",
    "idempotency_key",
    "created_at",
]
"""The fields docs/api.md says CreateWorkload requires."""

# (overrides, the field path the error must name)
REFUSED_BY_THE_RECORD = [
    pytest.param({"priority": "high"}, "priority", id="priority-text"),
    pytest.param({"priority": 1.5}, "priority", id="priority-float"),
    pytest.param({"tenant_id": 5}, "tenant_id", id="tenant-int"),
    pytest.param({"input": {1, 2}}, "input", id="input-set"),
    pytest.param({"input": float("nan")}, "input", id="input-nan"),
    pytest.param({"input": {"x": float("inf")}}, "input", id="input-nested-inf"),
    pytest.param({"input": object()}, "input", id="input-object"),
    pytest.param(
        {"retry_policy": {"backoff": "linear"}}, "retry_policy.backoff", id="backoff-linear"
    ),
    pytest.param(
        {"retry_policy": {"max_attempts": -1}},
        "retry_policy.max_attempts",
        id="max-attempts-negative",
    ),
    pytest.param(
        {"dependencies": [{"workload_id": "w", "required_state": "DONE"}]},
        "dependencies.0.required_state",
        id="dependency-state-unknown",
    ),
    pytest.param({"timeouts": {"queue_ms": -1}}, "timeouts.queue_ms", id="timeout-negative"),
    pytest.param({"timeouts": {"overall_ms": "5s"}}, "timeouts.overall_ms", id="timeout-text"),
    pytest.param(
        {"capability_snapshot": "email:send"}, "capability_snapshot", id="capabilities-bare-string"
    ),
    pytest.param({"created_at": "10"}, "created_at", id="created-at-text"),
    pytest.param({"not_before": 1.5}, "not_before", id="not-before-float"),
    pytest.param({"bogus": 1}, "bogus", id="unknown-field"),
]

# Well-formed records that admission refuses.
REFUSED_AT_ADMISSION = [
    pytest.param({"timeouts": {"queue_ms": 0}}, "timeouts.queue_ms", id="timeout-zero"),
    pytest.param({"timeouts": {"heartbeat_ms": 0}}, "timeouts.heartbeat_ms", id="heartbeat-zero"),
    pytest.param({"idempotency_key": ""}, "idempotency_key", id="key-empty"),
    pytest.param({"idempotency_key": "   "}, "idempotency_key", id="key-blank"),
    pytest.param(
        {"timeouts": {"approval_ms": 1000}},
        "timeouts.approval_ms",
        id="approval-timeout-without-policy",
    ),
]


def request_fields(**overrides: Any) -> dict[str, Any]:
    fields = make_request().model_dump()
    fields.update(overrides)
    return fields


def assert_names(error: WorkloadError, field: str) -> None:
    assert error.code == "WORKLOAD_INVALID"
    assert error.details is not None
    assert error.details["fields"] == [field]
    assert field in error.message


def assert_nothing_committed(store: WorkloadStore, revision: int) -> None:
    assert store.db.current_revision() == revision
    assert store.list("t", "app") == []


# ------------------------------------------------------------------ CreateWorkload(...)


@pytest.mark.parametrize(("overrides", "field"), REFUSED_BY_THE_RECORD)
def test_a_malformed_request_cannot_be_constructed(overrides, field):
    with pytest.raises(WorkloadError) as refused:
        make_request(**overrides)
    assert_names(refused.value, field)


@pytest.mark.parametrize("missing", REQUIRED)
def test_a_request_without_a_required_field_cannot_be_constructed(missing):
    fields = request_fields()
    del fields[missing]
    with pytest.raises(WorkloadError) as refused:
        CreateWorkload(**fields)
    assert_names(refused.value, missing)
    assert "required" in refused.value.message.lower()


def test_every_missing_field_is_named_at_once():
    with pytest.raises(WorkloadError) as refused:
        CreateWorkload(tenant_id="t")
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details["fields"] == [f for f in REQUIRED if f != "tenant_id"]


def test_construction_refuses_with_workload_error_not_a_pydantic_error():
    with pytest.raises(WorkloadError) as refused:
        make_request(priority="high")
    assert type(refused.value) is WorkloadError


def test_only_the_documented_fields_are_required():
    request = CreateWorkload(**{name: request_fields()[name] for name in REQUIRED})
    assert request.priority == 0
    assert request.session_id is None
    assert request.connection_scopes == frozenset()


# ------------------------------------------------------------------ store.admit(...)


@pytest.mark.parametrize(("overrides", "field"), REFUSED_BY_THE_RECORD)
def test_admitting_a_malformed_request_is_refused_and_commits_nothing(store, overrides, field):
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.admit(request_fields(**overrides))
    assert_names(refused.value, field)
    assert_nothing_committed(store, revision)


@pytest.mark.parametrize("missing", REQUIRED)
def test_admitting_a_request_without_a_required_field_commits_nothing(store, missing):
    fields = request_fields()
    del fields[missing]
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.admit(fields)
    assert_names(refused.value, missing)
    assert_nothing_committed(store, revision)


@pytest.mark.parametrize(("overrides", "field"), REFUSED_AT_ADMISSION)
def test_admission_refuses_what_the_record_allows_and_commits_nothing(store, overrides, field):
    request = make_request(**overrides)  # well-formed as a record
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.admit(request)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": [field]}
    readable = field.replace("_", " ") if field == "idempotency_key" else field
    assert readable in refused.value.message
    assert_nothing_committed(store, revision)


@pytest.mark.parametrize("field", ["tenant_id", "application_id", "environment", "definition_id"])
def test_admission_refuses_an_empty_identifier(store, field):
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.admit(make_request(**{field: ""}))
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": [field]}
    assert store.db.current_revision() == revision


def test_admitting_something_that_is_not_a_request_is_invalid(store):
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.admit(None)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert_nothing_committed(store, revision)


def test_the_store_still_admits_good_work_after_refusals(store):
    revision = store.db.current_revision()
    for overrides in ({"priority": "high"}, {"input": {1, 2}}, {"idempotency_key": ""}):
        with pytest.raises(WorkloadError):
            store.admit(request_fields(**overrides))
    w, created = store.admit(make_request())
    assert created
    assert store.db.current_revision() == revision + 1
    assert [listed.workload_id for listed in store.list("t", "app")] == [w.workload_id]


# ------------------------------------------------------------------ worker calls


@dataclass
class Work:
    store: WorkloadStore
    ready: str
    """A READY workload that any worker with CAPABILITIES could claim."""
    held: str
    """A CLAIMED workload."""
    claim: WorkloadClaim

    def versions(self) -> tuple[int, int, int]:
        def version(workload_id: str) -> int:
            return self.store.db.get_row(DURABLE_WORK_COLLECTION, workload_id).version

        return (self.store.db.current_revision(), version(self.ready), version(self.held))


@pytest.fixture
def work(store) -> Work:
    held, _ = store.admit(make_request(idempotency_key="held"))
    claim = store.claim(held.workload_id, "w1", CAPABILITIES, now=11)
    ready, _ = store.admit(make_request(idempotency_key="ready"))
    return Work(store, ready.workload_id, held.workload_id, claim)


def claim_ready(**kwargs: Any) -> Callable[[Work], Any]:
    def call(work: Work) -> Any:
        arguments = {"capabilities": CAPABILITIES, "now": 12, "lease_ms": 30_000, **kwargs}
        return work.store.claim(work.ready, "w2", **arguments)

    return call


def claim_next(**kwargs: Any) -> Callable[[Work], Any]:
    def call(work: Work) -> Any:
        arguments = {"capabilities": CAPABILITIES, "now": 12, "lease_ms": 30_000, **kwargs}
        return work.store.claim_next("t", "app", "w2", **arguments)

    return call


def on_held(method: str, *args: Any, **kwargs: Any) -> Callable[[Work], Any]:
    def call(work: Work) -> Any:
        fields = {"fencing_token": work.claim.fencing_token, "now": 12, **kwargs}
        token = fields.pop("fencing_token")
        workload_id = fields.pop("workload_id", work.held)
        return getattr(work.store, method)(
            workload_id, work.claim.claim_id, "w1", token, *args, **fields
        )

    return call


DAY_MS = 24 * 3600 * 1000
"""The store's default lease cap."""

INVALID_WORKER_CALLS = [
    pytest.param(claim_ready(lease_ms=DAY_MS + 1), "lease_ms", id="claim-lease-over-the-cap"),
    pytest.param(claim_ready(lease_ms=-5), "lease_ms", id="claim-lease-negative"),
    pytest.param(claim_ready(lease_ms=2**53 - 1), "lease_ms", id="claim-lease-285000-years"),
    pytest.param(claim_ready(lease_ms=1000.0), "lease_ms", id="claim-lease-float"),
    pytest.param(claim_next(lease_ms=DAY_MS + 1), "lease_ms", id="claim-next-lease-over-the-cap"),
    pytest.param(claim_ready(now="10"), "now", id="claim-now-text"),
    pytest.param(claim_ready(now=-1), "now", id="claim-now-negative"),
    pytest.param(
        claim_ready(capabilities="email:send"), "capabilities", id="claim-capabilities-bare-string"
    ),
    pytest.param(claim_ready(capabilities=[1]), "capabilities", id="claim-capabilities-ints"),
    pytest.param(claim_ready(capabilities=None), "capabilities", id="claim-capabilities-none"),
    pytest.param(
        claim_next(capabilities="email:send"),
        "capabilities",
        id="claim-next-capabilities-bare-string",
    ),
    pytest.param(on_held("start", fencing_token="1"), "fencing_token", id="start-token-text"),
    pytest.param(on_held("start", fencing_token=-1), "fencing_token", id="start-token-negative"),
    pytest.param(on_held("start", fencing_token=True), "fencing_token", id="start-token-bool"),
    pytest.param(on_held("start", now="10"), "now", id="start-now-text"),
    pytest.param(
        on_held("heartbeat", extend_ms=DAY_MS + 1), "extend_ms", id="heartbeat-extend-over-the-cap"
    ),
    pytest.param(on_held("heartbeat", extend_ms=-5), "extend_ms", id="heartbeat-extend-negative"),
    pytest.param(
        on_held("heartbeat", fencing_token="1"), "fencing_token", id="heartbeat-token-text"
    ),
    pytest.param(on_held("heartbeat", now="10"), "now", id="heartbeat-now-text"),
    pytest.param(
        on_held("fail", "transient_connection", "boom", effect="maybe"),
        "effect",
        id="fail-effect-maybe",
    ),
    pytest.param(
        on_held("fail", "transient_connection", "boom", fencing_token="1"),
        "fencing_token",
        id="fail-token-text",
    ),
    pytest.param(on_held("fail", "", "boom"), "kind", id="fail-kind-empty"),
    pytest.param(
        on_held("confirm_cancel", fencing_token="1"),
        "fencing_token",
        id="confirm-cancel-token-text",
    ),
]


@pytest.mark.parametrize(("call", "field"), INVALID_WORKER_CALLS)
def test_a_malformed_worker_call_is_refused_and_commits_nothing(work, call, field):
    before = work.versions()
    with pytest.raises(WorkloadError) as refused:
        call(work)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": [field]}
    assert field in refused.value.message
    assert work.versions() == before


UNKNOWN = "workload_000000000000000000000000"

UNKNOWN_WORKLOAD_CALLS = [
    pytest.param(lambda work: work.store.get(UNKNOWN), id="get"),
    pytest.param(lambda work: work.store.claim(UNKNOWN, "w2", CAPABILITIES, now=12), id="claim"),
    pytest.param(on_held("start", workload_id=UNKNOWN), id="start"),
    pytest.param(on_held("heartbeat", workload_id=UNKNOWN), id="heartbeat"),
    pytest.param(on_held("checkpoint", {"n": 1}, workload_id=UNKNOWN), id="checkpoint"),
    pytest.param(on_held("fail", "transient_connection", "boom", workload_id=UNKNOWN), id="fail"),
    pytest.param(lambda work: work.store.cancel(UNKNOWN, "operator", now=12), id="cancel"),
    pytest.param(lambda work: work.store.timeout(UNKNOWN, "operator", now=12), id="timeout"),
]


@pytest.mark.parametrize("call", UNKNOWN_WORKLOAD_CALLS)
def test_a_call_on_an_unknown_workload_is_not_found_and_commits_nothing(work, call):
    before = work.versions()
    with pytest.raises(WorkloadError) as refused:
        call(work)
    assert refused.value.code == "WORKLOAD_NOT_FOUND"
    assert UNKNOWN in refused.value.message
    assert work.versions() == before


def test_the_valid_calls_the_refusals_stand_for_do_commit(work):
    # The refusals above are refusals of their input, not of the call: with good input
    # each one commits.
    before = work.versions()
    claim_ready()(work)
    on_held("heartbeat")(work)
    after = work.versions()
    assert after[0] == before[0] + 2
    assert after[1] == before[1] + 1
    assert after[2] == before[2] + 1


# ------------------------------------------------------------------ out-of-range and odd types
#
# docs/api.md, "Every refusal raises WorkloadError and commits nothing": integers beyond the
# JSON-safe range (which once escaped as OverflowError from the SQLite binding), and
# reasons or artifacts of the wrong type (which once escaped as TypeError), are each
# WORKLOAD_INVALID naming the field.

BEYOND_64_BITS = 2**63


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"priority": BEYOND_64_BITS}, "priority", id="priority"),
        pytest.param({"created_at": BEYOND_64_BITS}, "created_at", id="created_at"),
        pytest.param({"not_before": BEYOND_64_BITS}, "not_before", id="not_before"),
    ],
)
def test_admitting_an_integer_beyond_64_bits_is_invalid_and_commits_nothing(
    store, overrides, field
):
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.admit(make_request(**overrides))
    assert_names(refused.value, field)
    assert_nothing_committed(store, revision)


BEYOND_64_BIT_WORKER_CALLS = [
    pytest.param(claim_ready(now=BEYOND_64_BITS), "now", id="claim-now"),
    pytest.param(claim_ready(lease_ms=2**80), "lease_ms", id="claim-lease"),
    pytest.param(claim_next(now=BEYOND_64_BITS), "now", id="claim-next-now"),
    pytest.param(on_held("heartbeat", extend_ms=2**80), "extend_ms", id="heartbeat-extend"),
    pytest.param(
        lambda work: work.store.enforce_deadlines(now=BEYOND_64_BITS),
        "now",
        id="enforce-deadlines-now",
    ),
    pytest.param(
        lambda work: work.store.recover_expired(now=BEYOND_64_BITS), "now", id="recover-expired-now"
    ),
]


@pytest.mark.parametrize(("call", "field"), BEYOND_64_BIT_WORKER_CALLS)
def test_a_worker_call_with_an_integer_beyond_64_bits_is_invalid_and_commits_nothing(
    work, call, field
):
    before = work.versions()
    with pytest.raises(WorkloadError) as refused:
        call(work)
    assert_names(refused.value, field)
    assert work.versions() == before


def test_an_operator_retry_with_a_reason_that_is_not_text_is_invalid(work):
    store = work.store
    store.fail(work.held, work.claim.claim_id, "w1", work.claim.fencing_token, "fatal", "x", now=12)
    before = work.versions()
    with pytest.raises(WorkloadError) as refused:
        store.retry(work.held, "operator", now=13, reason=5)
    assert_names(refused.value, "reason")
    assert work.versions() == before


def test_completing_with_artifacts_that_are_not_a_list_is_invalid(work):
    store = work.store
    store.start(work.held, work.claim.claim_id, "w1", work.claim.fencing_token, now=12)
    before = work.versions()
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            work.held,
            work.claim.claim_id,
            "w1",
            work.claim.fencing_token,
            "r1",
            {"ok": True},
            artifacts=5,
            now=13,
        )
    assert_names(refused.value, "artifacts")
    assert work.versions() == before


@pytest.mark.parametrize("artifacts", ["report.pdf", [5], [""]])
def test_artifacts_must_be_a_list_of_names_not_a_bare_string(work, artifacts):
    store = work.store
    store.start(work.held, work.claim.claim_id, "w1", work.claim.fencing_token, now=12)
    before = work.versions()
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            work.held,
            work.claim.claim_id,
            "w1",
            work.claim.fencing_token,
            "r1",
            {},
            artifacts,
            now=13,
        )
    assert_names(refused.value, "artifacts")
    assert work.versions() == before


def test_secret_references_must_be_a_list_not_a_bare_string(work):
    with pytest.raises(WorkloadError) as refused:
        work.store.execution_context(
            work.held,
            work.claim.claim_id,
            "w1",
            work.claim.fencing_token,
            now=12,
            secret_references="secret://x",
        )
    assert_names(refused.value, "secret_references")


def test_a_decision_whose_reason_is_not_text_is_invalid_not_silently_dropped(store):
    from feltdb import ApprovalOutcome, ApprovalPolicy, Subject

    gated, _ = store.admit(make_request(approval=ApprovalPolicy()))
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.decide(
            gated.workload_id,
            Subject.human("ada"),
            ApprovalOutcome.APPROVED,
            5,
            "g",
            gated.input_hash,
            now=11,
        )
    assert_names(refused.value, "reason")
    assert store.db.current_revision() == revision


def test_the_library_refuses_a_5_mb_input_as_the_server_does(store):
    from support.factories import make_request

    with pytest.raises(WorkloadError) as refused:
        store.admit(make_request(input={"blob": "x" * 5_000_000}))
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": ["input"]}
    assert store.list("t", "app") == []


SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        # A malformed identifier is refused before a secret in another identifier, even
        # one checked before it…
        (
            {"environment": SECRET, "session_id": "s" * 300},
            "WORKLOAD_INVALID",
            "session_id",
        ),
        # …and a secret identifier before a blank one.
        ({"environment": " ", "session_id": SECRET}, "WORKLOAD_SECRET_REJECTED", "session_id"),
        # …and before a secret in the input, which comes before one in an identifier.
        (
            {"session_id": SECRET, "input": {"token": "x"}},
            "WORKLOAD_SECRET_REJECTED",
            "input",
        ),
        # The first secret identifier, in the order the fields are checked, is named.
        (
            {"trigger": SECRET, "session_id": SECRET},
            "WORKLOAD_SECRET_REJECTED",
            "trigger",
        ),
        ({"session_id": SECRET}, "WORKLOAD_SECRET_REJECTED", "session_id"),
    ],
)
def test_admission_refuses_in_one_order_whatever_else_is_wrong(store, overrides, code, field):
    with pytest.raises(WorkloadError) as refused:
        store.admit(make_request(**overrides))
    assert refused.value.code == code
    assert refused.value.details == {"fields": [field]}
    assert store.list("t", "app") == []
