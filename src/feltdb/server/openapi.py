"""What the OpenAPI schema says beyond the body models: the submission's schema, each
route's answers, and the server's lease cap.

``POST /v1/workloads`` declares :data:`~feltdb.work.submission.Submission` (the one request
model of the server, the client and the command line) with the bounds admission checks
beyond the model's types (:data:`SUBMISSION_SCHEMA`), so a client generated from the
schema, or a fuzzer, never builds a submission the schema calls valid and the store
refuses for its shape.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from feltdb.fields import MAX_ID_CHARS, MAX_LIST_ITEMS
from feltdb.records.base import Record
from feltdb.server.errors import error_responses
from feltdb.server.fields import NO_NUL, NOT_BLANK
from feltdb.work.concurrency import DEFINITION_KEY_PREFIX
from feltdb.work.submission import Submission

SUBMISSION_TITLE = "SubmitWorkload"
SUBMISSION_DESCRIPTION = (
    "``POST /v1/workloads``: a CreateWorkload without the fields the token and the server"
    " supply (tenant, application, requester, authorization snapshot, created_at)."
)


def inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``#/$defs/...`` references replaced by the definitions (an OpenAPI
    operation cannot point into a schema's own ``$defs``).
    """
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**resolve(defs[ref.removeprefix("#/$defs/")]), **resolve(rest)}
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)  # type: ignore[no-any-return]


def _bounded(node: dict[str, Any], *, required: bool) -> None:
    """Declare an identifier's bounds on a string schema ``node`` (or a nullable one)."""
    for option in node.get("anyOf", [node]):
        if option.get("type") == "string":
            option["maxLength"] = MAX_ID_CHARS
            option["pattern"] = NOT_BLANK if required else NO_NUL
            if required:
                option["minLength"] = 1


def _bounded_items(node: dict[str, Any]) -> None:
    node["maxItems"] = MAX_LIST_ITEMS
    _bounded(node["items"], required=False)


def _bound_approval(properties: dict[str, Any]) -> None:
    """Approvers and their kinds are people or services, at most 1,024 of them."""
    people = ["human", "service"]
    for policy in properties["approval"]["anyOf"]:
        if policy.get("type") != "object":
            continue
        kinds = policy["properties"]["approver_kinds"]
        kinds.update(items={"type": "string", "enum": people}, minItems=1)
        approvers = policy["properties"]["approvers"]
        approvers["maxItems"] = MAX_LIST_ITEMS
        approvers["items"]["properties"]["kind"] = {"type": "string", "enum": people}
        _bounded(approvers["items"]["properties"]["id"], required=False)


def _given(name: str) -> dict[str, Any]:
    """The schema of an object whose field ``name`` is given, and not ``null``."""
    return {"properties": {name: {"not": {"type": "null"}}}, "required": [name]}


def _sets_as_lists(node: Any) -> None:
    """Drop ``uniqueItems`` everywhere under ``node``: a submission's sets (capabilities,
    scopes, the kinds of failure retried, approvers) are read as sets, so an item given
    twice counts once; the schema says so rather than promise a refusal.
    """
    if isinstance(node, dict):
        node.pop("uniqueItems", None)
        for value in node.values():
            _sets_as_lists(value)
    elif isinstance(node, list):
        for value in node:
            _sets_as_lists(value)


def _submission_schema() -> dict[str, Any]:
    """:data:`Submission`'s schema, with what admission checks beyond the model's types
    (``validate_admission``): identifiers of at most 256 characters without NUL, the
    required ones not blank; lists of at most 1,024 items; a timeout given is at least 1 ms;
    approvers and their kinds are people or services; ``approval_ms`` needs an approval.
    What the schema cannot say (a dependency names visible work, no secrets in the input,
    the token covering the new workload) is answered 422 or 403, as declared.
    """
    schema = inline_defs(Submission.model_json_schema())
    schema.update(title=SUBMISSION_TITLE, description=SUBMISSION_DESCRIPTION)
    properties = schema["properties"]
    for name in ("environment", "definition_id", "idempotency_key"):
        _bounded(properties[name], required=True)
    for name in ("definition_revision", "trigger", "session_id"):
        _bounded(properties[name], required=False)
    for name in ("capability_snapshot", "connection_scopes"):
        _bounded_items(properties[name])
    _bounded_items(properties["retry_policy"]["properties"]["retry_on"])
    properties["dependencies"]["maxItems"] = MAX_LIST_ITEMS
    _bounded(properties["dependencies"]["items"]["properties"]["workload_id"], required=True)
    for timeout in properties["timeouts"]["properties"].values():
        for option in timeout.get("anyOf", [timeout]):
            if option.get("type") == "integer":
                option["minimum"] = 1
    _bound_approval(properties)
    for name in ("concurrency_key", "rate_limit", "rate_key", "fairness_key"):
        _bounded(properties[name], required=True)
    for option in properties["concurrency_key"]["anyOf"]:  # definitions' defaults' keys
        if option.get("type") == "string":
            option["not"] = {"pattern": f"^{re.escape(DEFINITION_KEY_PREFIX)}"}
    _sets_as_lists(schema)
    # A concurrency key and its limit come together (neither, or both); a rate key names
    # its limit.
    schema["allOf"] = [
        {"if": _given("concurrency_key"), "then": _given("concurrency_limit")},
        {"if": _given("concurrency_limit"), "then": _given("concurrency_key")},
        {"if": _given("rate_key"), "then": _given("rate_limit")},  # a key of a named limit
    ]
    # approval_ms is the wait for an approval, so it needs one.
    schema["if"] = {
        "properties": {
            "timeouts": {
                "properties": {"approval_ms": {"type": "integer"}},
                "required": ["approval_ms"],
            }
        },
        "required": ["timeouts"],
    }
    schema["then"] = {"properties": {"approval": {"type": "object"}}, "required": ["approval"]}
    return schema


SUBMISSION_SCHEMA = _submission_schema()
"""The declared body of ``POST /v1/workloads`` (inlined: no ``$defs``)."""

_SUBMIT_EXAMPLE = {
    "environment": "production",
    "definition_id": "send-welcome-email",
    "definition_revision": "1",
    "trigger": "api",
    "input": {"to": "user@example.com"},
    "capability_snapshot": ["email:send"],
    "idempotency_key": "welcome-42",
}

SUBMIT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SUBMISSION_SCHEMA, "example": _SUBMIT_EXAMPLE}},
    }
}
"""``POST /v1/workloads``'s ``openapi_extra``: the body is read as a dict and parsed by the
admission request, so FastAPI is told its schema rather than given a model to validate."""


def answers(
    model: type[BaseModel | Record] | None, *errors: int, status: int = 200
) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: its success answer's model (a body model, or a record,
    whose schema is made from its declaration) and its error statuses.
    """
    declared = error_responses(*errors)
    if model is not None:
        declared[status] = {"model": model}
    return declared


AUTH = (401, 403, 503)
"""Every /v1 route: the token is checked (401/403) against the store's revocations (503)."""
ON_WORKLOAD = (*AUTH, 404, 409, 422)
"""A route acting on one workload: absent or foreign (404), refused by its state (409),
or given an invalid request (422)."""
WITH_BODY = (*ON_WORKLOAD, 413)
"""A route acting on one workload with a body (413: over the limit)."""

BATCH = (*AUTH, 413, 422)
"""A batch route: the token (401/403/503), the body's size (413) and shape (422) refuse
the whole request; each item's own refusal is in its answer."""

LEASE_FIELDS = ("lease_ms", "extend_ms")
"""The request fields bounded by the store's lease cap."""


def declare_lease_cap(app: FastAPI, max_lease_ms: int) -> None:
    """Make ``app``'s OpenAPI schema say this server's lease cap: the ``maximum`` of every
    lease field is ``max_lease_ms`` (it is the store's setting, so the body models, shared
    by every app, cannot carry it).
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # built once, then cached by FastAPI; the edit is idempotent
        for component in schema.get("components", {}).get("schemas", {}).values():
            for name in LEASE_FIELDS:
                field = component.get("properties", {}).get(name)
                if isinstance(field, dict):
                    field["maximum"] = max_lease_ms
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
