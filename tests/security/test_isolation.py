"""Points 2 to 5: isolation between tenants, applications, resources, subjects and
constraints, each decided in one place (``feltdb.auth.policy``, the store's admission).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import msgspec
import pytest
from support.attack import REQUESTER, WORKER, admit, bearer, claim, held
from support.factories import SIGNER, make_request
from support.server import Server, submission

from feltdb import CreateWorkload, Subject, WorkloadDependency, WorkloadError, WorkloadStore
from feltdb.auth import GrantConstraints

CLAIMING = ["workload:claim", "email:send"]

# ------------------------------------------------------------------ 2: dependencies


def test_a_dependency_on_another_tenants_work_is_refused_as_missing_work_is(
    http: httpx.Client, server: Server, app: str
):
    theirs = admit(http, server.headers(app, tenant="tenant-a", subject=REQUESTER), "a-work")
    ours = server.headers(app, tenant="tenant-b", subject=REQUESTER)
    answers = {}
    for name, target in (("foreign", theirs["workload_id"]), ("missing", "workload_" + "0" * 24)):
        answer = http.post(
            "/v1/workloads",
            json=submission(f"child-{name}", dependencies=[{"workload_id": target}]),
            headers=ours,
        )
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "WORKLOAD_INVALID"
        assert error["details"]["fields"] == ["dependencies.0.workload_id"]
        answers[name] = error["message"].replace(target, "ID")
    # One answer for both: the refusal tells nothing of whether tenant A's work exists.
    assert answers["foreign"] == answers["missing"]
    # Our own work is a dependency as before.
    parent = admit(http, ours, "parent")
    child = http.post(
        "/v1/workloads",
        json=submission("child", dependencies=[{"workload_id": parent["workload_id"]}]),
        headers=ours,
    )
    assert child.status_code == 201, child.text


def in_tenant(tenant: str, **overrides: object) -> CreateWorkload:
    """The fixture request, made in ``tenant`` under a snapshot of that tenant."""
    base = make_request()
    grant = msgspec.structs.replace(base.authorization_snapshot.grant, tenant_id=tenant)
    return make_request(tenant_id=tenant, authorization_snapshot=SIGNER.sign(grant), **overrides)


def test_the_library_refuses_a_dependency_outside_the_tenant_and_application(
    new_target: Callable[..., str],
):
    with WorkloadStore.open(new_target()) as store:
        parent = store.create(make_request(idempotency_key="parent"))
        for request in (
            in_tenant(
                "t2",
                idempotency_key="child",
                dependencies=[WorkloadDependency(workload_id=parent.workload_id)],
            ),
            make_request(
                idempotency_key="orphan",
                dependencies=[WorkloadDependency(workload_id="workload_missing")],
            ),
        ):
            with pytest.raises(WorkloadError) as refused:
                store.admit(request)
            assert refused.value.code == "WORKLOAD_INVALID"
            assert refused.value.details == {"fields": ["dependencies.0.workload_id"]}
        assert [w.workload_id for w in store.list("t", "app")] == [parent.workload_id]
        assert store.list("t2", "app") == []
        child = in_tenant("t2", idempotency_key="own")
        own = store.create(child)
        dependent = in_tenant(
            "t2",
            idempotency_key="dependent",
            dependencies=[WorkloadDependency(workload_id=own.workload_id)],
        )
        assert store.admit(dependent)[1]


# ------------------------------------------------------------------ 3: resource globs

ODD_PATTERNS = ["flow://{app}/workloads/?", "flow://{app}/workloads/[*]", "flow://{app}/x*"]


@pytest.mark.parametrize("pattern", ODD_PATTERNS)
def test_a_scope_that_only_matches_the_text_star_covers_no_whole_application(
    http: httpx.Client, server: Server, app: str, pattern: str
):
    admit(http, server.headers(app, subject=REQUESTER), "listed")
    odd = server.headers(app, resources=[pattern.format(app=app)])
    for method, path in (
        ("GET", "/v1/workloads"),
        ("GET", "/v1/approvals"),
        ("GET", "/v1/dead-letters"),
        ("GET", "/v1/audit"),
        ("POST", "/v1/claims"),
    ):
        answer = http.request(method, path, headers=odd, json={} if method == "POST" else None)
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["error"]["details"]["missing"] == "resource", path
    # The work was not claimed: it is still READY for a worker whose grant covers it.
    assert claim(http, server.headers(app, subject=WORKER))["workload_id"]


@pytest.mark.parametrize(
    "pattern", ["flow://{app}/workloads/*", "flow://{app}/*", "flow://*", "flow://*/workloads/*"]
)
def test_a_scope_covering_every_workload_may_list_and_claim(
    http: httpx.Client, server: Server, app: str, pattern: str
):
    admit(http, server.headers(app, subject=REQUESTER), "listed")
    covering = server.headers(app, resources=[pattern.format(app=app)])
    assert http.get("/v1/workloads", headers=covering).status_code == 200
    assert http.post("/v1/claims", json={}, headers=covering).status_code == 200


# ------------------------------------------------------------------ 4: worker identity


def test_a_subject_of_another_kind_with_the_same_id_is_another_worker(
    http: httpx.Client, server: Server, app: str
):
    workload_id, held_fence = held(http, server, app)  # held by worker:w1
    impostor = server.headers(app, subject=Subject.agent(WORKER.id), capabilities=CLAIMING)
    for action, body in (
        ("heartbeat", held_fence),
        ("checkpoint", {**held_fence, "state": {"step": 1}}),
        ("complete", {**held_fence, "result_id": "r-impostor", "output": {"ok": 1}}),
        ("fail", {**held_fence, "kind": "permanent", "error": "no"}),
    ):
        answer = http.post(f"/v1/workloads/{workload_id}/{action}", json=body, headers=impostor)
        assert answer.status_code == 409, (action, answer.text)
        assert answer.json()["error"]["code"] == "WORKLOAD_STALE_FENCE", action
    # Nor may it read the work (it holds no claim on it, and no workload:read).
    assert http.get(f"/v1/workloads/{workload_id}", headers=impostor).status_code == 403
    worker = server.headers(app, subject=WORKER, capabilities=CLAIMING)
    done = http.post(
        f"/v1/workloads/{workload_id}/complete",
        json={**held_fence, "result_id": "r-real", "output": {"ok": 1}},
        headers=worker,
    )
    assert done.status_code == 200, done.text
    assert done.json()["produced_by"] == "worker:w1"


# ------------------------------------------------------------------ 5: constraints


def constrained(server: Server, app: str, **limits: list[str]) -> dict[str, str]:
    grant = msgspec.structs.replace(
        server.grant(app, subject=REQUESTER), constraints=GrantConstraints(**limits)
    )
    return bearer(server.keyring.sign(grant))


def test_a_constrained_grant_submits_only_inside_its_constraints(
    http: httpx.Client, server: Server, app: str
):
    headers = constrained(server, app, environments=["staging"], definitions=["report"])
    for key, overrides, missing in (
        ("prod", {"environment": "production", "definition_id": "report"}, "environment"),
        ("other", {"environment": "staging", "definition_id": "send"}, "definition"),
    ):
        answer = http.post("/v1/workloads", json=submission(key, **overrides), headers=headers)
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["details"]["missing"] == missing
    inside = submission("inside", environment="staging", definition_id="report")
    assert http.post("/v1/workloads", json=inside, headers=headers).status_code == 201


def test_a_worker_constrained_to_a_definition_never_claims_or_touches_another(
    http: httpx.Client, server: Server, app: str
):
    requester = server.headers(app, subject=REQUESTER)
    other = admit(http, requester, "other", definition_id="other", priority=9)
    mine = admit(http, requester, "mine", definition_id="mine")
    worker = constrained(server, app, definitions=["mine"])
    assert claim(http, worker)["workload_id"] == mine["workload_id"]
    assert http.post("/v1/claims", json={}, headers=worker).status_code == 204
    # The other definition's work is invisible to it, as missing work is.
    for method, path in (
        ("POST", f"/v1/workloads/{other['workload_id']}/claim"),
        ("GET", f"/v1/workloads/{other['workload_id']}"),
        ("POST", f"/v1/workloads/{other['workload_id']}/cancel"),
    ):
        answer = http.request(method, path, headers=worker, json={} if method == "POST" else None)
        assert answer.status_code == 404, (path, answer.text)
    listed = http.get("/v1/workloads", headers=worker).json()["items"]
    assert [w["workload_id"] for w in listed] == [mine["workload_id"]]
    assert http.get("/v1/audit", headers=worker).status_code == 403
    # An unconstrained worker still sees and claims it.
    assert claim(http, server.headers(app))["workload_id"] == other["workload_id"]


def test_the_library_refuses_admission_outside_the_snapshots_constraints(
    new_target: Callable[..., str],
):
    request = make_request()
    grant = msgspec.structs.replace(
        request.authorization_snapshot.grant,
        constraints=GrantConstraints(environments=["staging"]),
    )
    with WorkloadStore.open(new_target()) as store, pytest.raises(WorkloadError) as refused:
        store.admit(make_request(authorization_snapshot=SIGNER.sign(grant)))
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    assert refused.value.details == {"missing": "environment"}


def test_claim_next_offers_only_the_definitions_and_environments_asked_for(
    new_target: Callable[..., str],
):
    with WorkloadStore.open(new_target()) as store:
        for key, definition, environment in (
            ("a", "send", "production"),
            ("b", "report", "production"),
            ("c", "report", "staging"),
        ):
            store.create(
                make_request(idempotency_key=key, definition_id=definition, environment=environment)
            )
        caps = {"email:send"}
        claimed = store.claim_next(
            "t", "app", "w", caps, 20, definitions={"report"}, environments={"staging"}
        )
        assert claimed is not None
        assert store.get(claimed.workload_id).idempotency_key == "c"
        assert (
            store.claim_next(
                "t", "app", "w", caps, 20, definitions={"report"}, environments={"staging"}
            )
            is None
        )
        assert store.claim_next("t", "app", "w", caps, 20, definitions=set()) is None
        left = store.claim_next("t", "app", "w", caps, 20, definitions={"send", "report"})
        assert left is not None


def test_another_tenants_result_id_neither_refuses_nor_reveals_ours(
    http: httpx.Client, server: Server, app: str
):
    theirs_id, theirs_fence = held(http, server, app)  # tenant "t"
    their_worker = server.headers(app, subject=WORKER)
    done = http.post(
        f"/v1/workloads/{theirs_id}/complete",
        json={**theirs_fence, "result_id": "invoice-42", "output": {}},
        headers=their_worker,
    )
    assert done.status_code == 200, done.text
    # Tenant "t2" probes the id without holding anything: the answer is the fence's.
    ours = server.headers(app, tenant="t2", subject=REQUESTER)
    mine = admit(http, ours, "mine")
    our_worker = server.headers(app, tenant="t2", subject=WORKER)
    probe = http.post(
        f"/v1/workloads/{mine['workload_id']}/complete",
        json={"claim_id": "x", "fencing_token": 0, "result_id": "invoice-42", "output": {}},
        headers=our_worker,
    )
    assert probe.status_code == 409, probe.text
    assert probe.json()["error"]["code"] == "WORKLOAD_CLAIM_INVALID"
    # And our work may use the same result id: ids are unique within an application.
    claimed = claim(http, our_worker)
    fenced = {"claim_id": claimed["claim_id"], "fencing_token": claimed["fencing_token"]}
    base = f"/v1/workloads/{mine['workload_id']}"
    assert http.post(f"{base}/start", json=fenced, headers=our_worker).status_code == 204
    completed = http.post(
        f"{base}/complete",
        json={**fenced, "result_id": "invoice-42", "output": {}},
        headers=our_worker,
    )
    assert completed.status_code == 200, completed.text


def test_a_constrained_grant_learns_nothing_of_hidden_work(
    http: httpx.Client, server: Server, app: str
):
    requester = server.headers(app, subject=REQUESTER)
    hidden = [
        admit(http, requester, f"hidden-{n}", environment="production", priority=100)
        for n in range(3)
    ]
    staging = constrained(server, app, environments=["staging"])
    seen = admit(http, staging, "seen", environment="staging")
    # Not through a dependency: hidden work is refused as missing work is.
    refusals = set()
    for target in (hidden[0]["workload_id"], "workload_" + "0" * 24):
        answer = http.post(
            "/v1/workloads",
            json=submission(
                f"dep-{target}", environment="staging", dependencies=[{"workload_id": target}]
            ),
            headers=staging,
        )
        assert answer.status_code == 422, answer.text
        refusals.add(answer.json()["error"]["message"].replace(target, "ID"))
    assert len(refusals) == 1
    # Not through a page or its cursor: full pages of what it sees, cursors of its own.
    page = http.get("/v1/workloads", params={"limit": 1}, headers=staging).json()
    assert [w["workload_id"] for w in page["items"]] == [seen["workload_id"]]
    assert page["next_cursor"] is None
    hidden_ids = {w["workload_id"] for w in hidden}
    everything = http.get("/v1/workloads", params={"limit": 1}, headers=server.headers(app))
    assert everything.json()["next_cursor"] is not None
    assert not any(h in str(page) for h in hidden_ids)


def test_only_a_grant_over_the_whole_application_may_revoke(
    http: httpx.Client, server: Server, app: str
):
    victim = server.grant(app)
    for narrow in (
        constrained(server, app, environments=["staging"]),
        server.headers(app, resources=[f"flow://{app}/workloads/workload_1"]),
    ):
        answer = http.post(f"/v1/grants/{victim.id}/revoke", headers=narrow)
        assert answer.status_code == 403, answer.text
        # Nor may it list the application's revocations: every grant's, like revoking.
        listed = http.get("/v1/grants/revocations", headers=narrow)
        assert listed.status_code == 403, listed.text
    assert http.get("/v1/workloads", headers=bearer(server.keyring.sign(victim))).status_code == 200
    whole = http.get("/v1/grants/revocations", headers=server.headers(app))
    assert whole.status_code == 200, whole.text
