"""The OpenAPI schema of the records, made from their declarations: field names as JSON
spells them, bounds, defaults and the records' own descriptions."""

from __future__ import annotations

from typing import Any

from feltdb import WorkloadStore
from feltdb.auth.tokens import Keyring
from feltdb.fields import MAX_ID_CHARS, MAX_SAFE_INTEGER
from feltdb.server.app import create_app


def schemas(store: WorkloadStore) -> dict[str, Any]:
    app = create_app(store, Keyring({"k": bytes(32)}, "k"), maintenance_interval_s=None)
    components: dict[str, Any] = app.openapi()["components"]["schemas"]
    return components


def test_each_record_s_schema_says_its_fields_bounds_defaults_and_purpose(
    store: WorkloadStore,
) -> None:
    found = schemas(store)
    policy = found["WorkloadRetryPolicy"]
    assert policy["description"].startswith("How often, how soon")
    assert policy["properties"]["max_attempts"]["default"] == 3
    assert policy["properties"]["max_attempts"]["maximum"] == MAX_SAFE_INTEGER
    assert policy["properties"]["retry_on"]["default"] == [
        "timeout", "transient_connection", "worker_failure",
    ]  # fmt: skip
    assert policy["additionalProperties"] is False
    workload = found["Workload"]
    assert {"workload_id", "state", "session_id", "dependencies"} <= set(workload["required"])
    assert "approval" not in workload["required"]
    assert (
        "Not claimable before this instant"
        in (workload["properties"]["next_attempt_at"]["description"])
    )
    event = found["WorkloadEvent"]["properties"]
    assert "from" in event and "from_state" not in event
    assert found["Subject"]["properties"]["id"]["maxLength"] == MAX_ID_CHARS
