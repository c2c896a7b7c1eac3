"""Schemathesis over the real server's ``/openapi.json`` with every check it has: no
request it generates gets a 5xx or an undocumented status, and every answer conforms to
what the schema declares.

This is the Python-API equivalent of ``st run --checks all --continue-on-failure``: the
schemathesis engine runs all its phases (examples, coverage, fuzzing, and stateful
sequences over the links it infers) over every operation, with every registered check
enabled the way ``--checks all`` enables them, ``max_response_time`` included at
schemathesis's own 10 s default: ``not_a_server_error``, ``status_code_conformance``,
``content_type_conformance``, ``response_headers_conformance``,
``response_schema_conformance``, ``negative_data_rejection``, ``positive_data_acceptance``,
``missing_required_header``, ``unsupported_method``, ``allow_header_conformance``,
``use_after_free``, ``ensure_resource_availability``, ``ignored_auth`` and
``object_level_authorization``. None is excluded (a check a later schemathesis registers
is enabled too), and the test asserts that each was applied. Ours,
:func:`error_body_shape`, runs over every answer besides: every 4xx answers
``{"error": {"code", "message", "details"}}`` with a known code, and a 401 carries
``WWW-Authenticate``.

Credentials are schemathesis's own (a Web Fuzzing Commons document, ``[auth.wfc]``), not a
header forced onto every request, so the checks about auth see them as configured auth:
``ignored_auth`` re-sends 2xx requests without a token and with a made-up one, the coverage
phase's "missing ``Authorization``" requests really go out without one
(``missing_required_header`` expects 401), and negative generation is not undone by a
header added afterwards. ``owner`` (this test's application) sends every request; ``peer``
(a token of all capabilities in another application) is the second user
``object_level_authorization`` needs: reads of what ``owner`` created are replayed as
``peer``, who must not get them.

``use_after_free`` judges reads after a successful ``DELETE``: the API's one is
``DELETE /v1/schedules/{schedule_id}``, after which the schedule must be gone (404).

Bounded and deterministic for CI: ``generation.deterministic`` (derandomized), a fixed
seed, no example database, no cache, one worker, :data:`MAX_EXAMPLES` per operation and
mode in the generating phases (the examples and coverage phases are bounded by the schema).
One adjustment keeps it bounded: ``POST /v1/claims`` and ``POST /v1/batches/claims``
long-poll for up to ``wait_ms``
(declared ``0..30000``) and the coverage phase sends those boundaries, so
:func:`bounded_long_poll` lowers a valid ``wait_ms`` above :data:`WAIT_MS_CAP` to the cap
(still valid, so a case's positive or negative intent is unchanged; values outside the
declared range are left for the negative cases).

Submissions reach the store: ``POST /v1/workloads`` declares its body as ``Submission``
(titled ``SubmitWorkload``: ``CreateWorkload`` without the fields the token and the server
supply), so generated bodies are admitted (201), which the test asserts.

The configuration, the two users, :func:`error_body_shape`, :func:`bounded_long_poll` and
the judging of every event are ``support/openapi_fuzzing.py``'s, shared with the soak
(``tests/reliability/test_openapi_soak.py``); this module sets the size and asserts what
must be true of the outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.openapi_fuzzing import (
    ALL_CHECKS,
    RAN_TO_THE_END,
    SEED,
    TESTING_PHASES,
    config_for,
    load_schema,
    operations_of,
    registered_checks,
    run_schemathesis,
    write_wfc_document,
)
from support.server import Server, serve

MAX_EXAMPLES = 5
"""Examples per operation and generation mode in the fuzzing and stateful phases (the
examples and coverage phases enumerate the schema and are bounded by it)."""


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of this module's own, on SQLite: the schema and every route are the same
    on both backends (the storage contract suites cover the backends), and a run of every
    check over every phase costs about a minute and a half on this machine, so it is paid
    once (the suite must stay well under 15 minutes)."""
    yield from serve(tmp_path_factory.mktemp("fuzz-server"))


def test_generated_requests_get_no_500_and_conforming_answers(
    api_server: Server, app: str, tmp_path: Path
) -> None:
    server = api_server
    registered = registered_checks()
    assert registered >= ALL_CHECKS, ALL_CHECKS - registered

    wfc = tmp_path / "wfc-auth.json"
    tokens = write_wfc_document(wfc, server, app, f"{app}-peer")
    config = config_for(wfc, seed=SEED, deterministic=True, max_examples=MAX_EXAMPLES)
    schema = load_schema(server, config)
    enabled = schema.config.checks_config_for()
    assert all(enabled.get_by_name(name=name).enabled for name in registered)
    assert enabled.max_response_time.enabled
    operations = operations_of(schema)
    assert len(operations) >= 16  # the /v1 routes and the two health routes

    outcome = run_schemathesis(schema)

    assert not outcome.errors, outcome.errors_report(tokens)
    assert not outcome.failures, outcome.failures_report(tokens)
    # Every testing phase ran (the stateful one over inferred links, which the stateful
    # checks need), every check was applied, and every operation was exercised.
    # A phase's FAILURE may be only the refusals beyond a schema, forgiven by the judge;
    # what failed otherwise is in `failures`. A phase that errored or was skipped did not run.
    outcomes = outcome.phase_outcomes(TESTING_PHASES)
    assert all(status in RAN_TO_THE_END for status in outcomes.values()), outcomes
    assert outcome.ran >= registered | {"max_response_time"}, registered - outcome.ran
    statuses = outcome.statuses
    assert set(statuses) >= {operation.label for operation in operations}
    # The declared submission body is the real one: generated submissions are admitted.
    assert 201 in statuses["POST /v1/workloads"], statuses["POST /v1/workloads"]
    # Nothing the fuzzer sent (a revocation, say) disabled the token every request carried,
    # which would have turned the rest of the run into 401s.
    owner = {"Authorization": f"Bearer {tokens['owner']}"}
    assert httpx.get(f"{server.url}/v1/workloads", headers=owner, timeout=15).status_code == 200
