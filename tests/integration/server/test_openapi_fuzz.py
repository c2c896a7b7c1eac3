"""Schemathesis over the real server's ``/openapi.json``: no request it generates gets a 500,
and every answer conforms to what the schema declares.

Bounded and deterministic for CI: each operation gets a few valid (positive) and a few
invalid (negative) requests, about :data:`BUDGET` in all, generated with ``derandomize``
(the same examples every run), no example database and no deadline. Every request carries
a valid token of all capabilities, in an application of this test alone.

Checks enabled: schemathesis's ``not_a_server_error``, ``response_schema_conformance``,
``content_type_conformance``, ``response_headers_conformance`` and
``status_code_conformance`` (every route declares the error statuses it answers, with the
``{"error": {"code", "message", "details"}}`` schema, and its 2xx answer's schema); and
ours, :func:`error_body_shape`: every 4xx answers that body with a known code, and a 401
carries ``WWW-Authenticate``.

Not enabled: ``negative_data_rejection``: the valid token added to every request undoes
schemathesis's negated ``Authorization`` headers, and the server ignores unknown query
parameters (as HTTP APIs commonly do), which that check counts as accepting invalid data.

Submissions reach the store: ``POST /v1/workloads`` declares its body as ``SubmitWorkload``
(``CreateWorkload`` without the fields the token and the server supply), so generated
bodies are admitted (201), which the test asserts.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi import checks as openapi_checks
from support.server import Server

from feltdb.errors import ErrorCode

BUDGET = 100
"""About this many requests in all, shared evenly by the operations and generation modes
(at least two each)."""

CHECKS = [
    not_a_server_error,
    openapi_checks.response_schema_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.status_code_conformance,
]


def error_body_shape(response: Any) -> str | None:
    """What is wrong with a 4xx answer's body, or ``None``."""
    if not 400 <= response.status_code < 500:
        return None
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} without a JSON body: {response.text[:200]!r}"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or set(error) != {"code", "message", "details"}:
        return f"{response.status_code} without the error body: {body!r:.200}"
    if error["code"] not in ErrorCode.__members__ or not isinstance(error["message"], str):
        return f"{response.status_code} with an unknown code or message: {error!r:.200}"
    if response.status_code == 401 and "www-authenticate" not in response.headers:
        return "401 without WWW-Authenticate"
    return None


def test_generated_requests_get_no_500_and_conforming_answers(server: Server, app: str):
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 16  # the /v1 routes and the two health routes
    headers = server.headers(app)
    failures: dict[tuple[str, str], str] = {}
    sent: dict[str, int] = {}
    statuses: dict[str, set[int]] = {}

    plan = [
        (operation, mode)
        for operation in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        # the health routes take no input to negate
        if mode is GenerationMode.POSITIVE or operation.path.startswith("/v1/")
    ]
    examples = max(2, BUDGET // len(plan))
    for operation, mode in plan:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case: schemathesis.Case) -> None:
            label = case.operation.label
            response = case.call(headers=headers, timeout=15)
            sent[label] = sent.get(label, 0) + 1
            statuses.setdefault(label, set()).add(response.status_code)
            for check in CHECKS:
                try:
                    case.validate_response(response, checks=[check])
                except (Failure, FailureGroup) as failure:
                    failures.setdefault((label, check.__name__), str(failure))
            problem = error_body_shape(response)
            if problem is not None:
                failures.setdefault((label, "error_body_shape"), problem)

        exercise()

    assert not failures, "\n\n".join(
        f"{op} / {check}:\n{text}" for (op, check), text in failures.items()
    )
    assert set(sent) == {operation.label for operation in operations}
    # The declared submission body is the real one: generated submissions are admitted.
    assert 201 in statuses["POST /v1/workloads"], statuses["POST /v1/workloads"]
