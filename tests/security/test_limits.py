"""Points 10 and 11: every input has a bound, and leases are capped but may be short."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.attack import REQUESTER, WORKER, admit, awaiting_approval, claim, fence, held
from support.server import Server, serve, submission

from feltdb import WorkloadStore

MAX_ID_CHARS, MAX_TEXT_CHARS = 256, 4096  # the README's bounds
LONG_ID = "x" * (MAX_ID_CHARS + 1)
LONG_TEXT = "x" * (MAX_TEXT_CHARS + 1)
DAY_MS = 24 * 3600 * 1000


def assert_invalid(answer: httpx.Response, field: str | None = None) -> None:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "WORKLOAD_INVALID"
    if field is not None:  # the field, or an item of it ("artifacts.0")
        named = [name.split(".")[0] for name in error["details"]["fields"]]
        assert field in named, error


# ------------------------------------------------------------------ 10: lengths


@pytest.mark.parametrize(
    "field",
    [
        "environment",
        "definition_id",
        "definition_revision",
        "trigger",
        "idempotency_key",
        "session_id",
    ],
)
def test_an_identifier_over_256_characters_is_refused_at_admission(
    http: httpx.Client, server: Server, app: str, field: str
):
    answer = http.post(
        "/v1/workloads", json=submission("k", **{field: LONG_ID}), headers=server.headers(app)
    )
    assert_invalid(answer, field)
    assert "at most 256 characters" in answer.json()["error"]["message"]


def test_a_capability_name_over_256_characters_is_refused(
    http: httpx.Client, server: Server, app: str
):
    body = submission("k", capability_snapshot=[LONG_ID])
    assert_invalid(http.post("/v1/workloads", json=body, headers=server.headers(app)))


def test_exactly_256_characters_is_admitted(http: httpx.Client, server: Server, app: str):
    body = submission("k" * MAX_ID_CHARS, environment="e" * MAX_ID_CHARS)
    assert http.post("/v1/workloads", json=body, headers=server.headers(app)).status_code == 201


def test_worker_reports_are_bounded_and_never_blank(http: httpx.Client, server: Server, app: str):
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    path = f"/v1/workloads/{workload_id}"
    for action, body, field in (
        ("complete", {"result_id": LONG_ID, "output": {}}, "result_id"),
        ("complete", {"result_id": "", "output": {}}, "result_id"),
        ("complete", {"result_id": "   ", "output": {}}, "result_id"),
        ("complete", {"result_id": "r\x00", "output": {}}, "result_id"),
        ("complete", {"result_id": "r", "output": {}, "artifacts": ["a" * 1025]}, "artifacts"),
        ("fail", {"kind": LONG_ID, "error": "e"}, "kind"),
        ("fail", {"kind": "", "error": "e"}, "kind"),
        ("fail", {"kind": " ", "error": "e"}, "kind"),
        ("fail", {"kind": "k\x00", "error": "e"}, "kind"),
        ("fail", {"kind": "k", "error": LONG_TEXT}, "error"),
    ):
        answer = http.post(f"{path}/{action}", json={**held_fence, **body}, headers=worker)
        assert_invalid(answer, field)
    assert http.get(path, headers=server.headers(app)).json()["state"] == "RUNNING"


def test_reasons_are_bounded(http: httpx.Client, server: Server, app: str):
    gated, approver = awaiting_approval(http, server, app)
    answer = http.post(
        f"/v1/workloads/{gated['workload_id']}/decision",
        json={"outcome": "rejected", "reason": LONG_TEXT, "input_hash": gated["input_hash"]},
        headers=approver,
    )
    assert_invalid(answer, "reason")
    retried = http.post(
        f"/v1/workloads/{gated['workload_id']}/retry",
        json={"reason": LONG_TEXT},
        headers=approver,
    )
    assert_invalid(retried, "reason")


def test_an_id_with_nul_is_refused_everywhere_an_id_is_taken(
    http: httpx.Client, server: Server, app: str
):
    headers = server.headers(app)
    assert_invalid(http.post("/v1/workloads", json=submission("k\x00"), headers=headers))
    assert_invalid(http.post("/v1/grants/g%00/revoke", headers=headers))
    assert_invalid(http.get("/v1/workloads/w%00", headers=headers))


# ------------------------------------------------------------------ 11: leases


@pytest.mark.parametrize("lease_ms", [2**53 - 1, DAY_MS + 1])
def test_a_lease_over_the_cap_is_refused(
    http: httpx.Client, server: Server, app: str, lease_ms: int
):
    admit(http, server.headers(app, subject=REQUESTER))
    worker = server.headers(app, subject=WORKER)
    assert_invalid(http.post("/v1/claims", json={"lease_ms": lease_ms}, headers=worker), "lease_ms")
    claimed = claim(http, worker, lease_ms=DAY_MS)
    assert claimed["expires_at"] - claimed["claimed_at"] == 24 * 3600
    beat = http.post(
        f"/v1/workloads/{claimed['workload_id']}/heartbeat",
        json={**fence(claimed), "extend_ms": lease_ms},
        headers=worker,
    )
    assert_invalid(beat, "extend_ms")


def test_a_lease_under_a_second_expires_at_once_as_the_reference_says(
    http: httpx.Client, server: Server, app: str
):
    admit(http, server.headers(app, subject=REQUESTER))
    worker = server.headers(app, subject=WORKER)
    claimed = claim(http, worker, lease_ms=500)
    assert claimed["expires_at"] == claimed["claimed_at"]  # now + 500 // 1000


def test_a_heartbeat_of_zero_hands_the_work_to_recovery(
    http: httpx.Client, server: Server, app: str
):
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    beat = http.post(
        f"/v1/workloads/{workload_id}/heartbeat",
        json={**held_fence, "extend_ms": 0},
        headers=worker,
    )
    assert beat.status_code == 200, beat.text
    assert beat.json()["expires_at"] == beat.json()["last_heartbeat"]
    with WorkloadStore.open(server.target) as store:
        # This pass recovers it, or the server's own maintenance loop just did.
        store.recover_expired(beat.json()["expires_at"] + 1)
        recovered = store.get(workload_id)
    assert recovered.state.value == "READY"
    assert recovered.attempts[-1].status.value == "WORKER_LOST"


def test_a_short_extension_does_not_mask_the_fence_refusal(
    http: httpx.Client, server: Server, app: str
):
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    wrong = {**held_fence, "claim_id": "claim_not_mine", "extend_ms": 500}
    beat = http.post(f"/v1/workloads/{workload_id}/heartbeat", json=wrong, headers=worker)
    assert beat.status_code == 409, beat.text
    assert beat.json()["error"]["code"] == "WORKLOAD_STALE_FENCE"


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose lease cap is a minute (``feltdb serve --max-lease 60``)."""
    home: Path = tmp_path_factory.mktemp("capped")
    yield from serve(home, None, "--max-lease", "60")


def test_the_lease_cap_is_the_servers_to_set(capped: Server, app: str):
    with httpx.Client(base_url=capped.url, timeout=15) as http:
        admit(http, capped.headers(app, subject=REQUESTER))
        worker = capped.headers(app, subject=WORKER)
        assert_invalid(http.post("/v1/claims", json={"lease_ms": 60_001}, headers=worker))
        assert claim(http, worker, lease_ms=60_000)["workload_id"]
