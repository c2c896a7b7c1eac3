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

``use_after_free`` is enabled but has nothing to act on: the API has no ``DELETE``
operation, and that check only judges reads after a successful ``DELETE``.

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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.transport import Response
from schemathesis.engine import Status, events, from_schema
from schemathesis.engine.run import PhaseName
from support.server import Server, serve

from feltdb.errors import ErrorCode
from feltdb.server.errors import RouteCode

SEED = 20240601
MAX_EXAMPLES = 5
"""Examples per operation and generation mode in the fuzzing and stateful phases (the
examples and coverage phases enumerate the schema and are bounded by it)."""

WAIT_MS_CAP = 50
"""The longest ``wait_ms`` a generated long-poll waits (milliseconds)."""
LONG_POLLS = frozenset({"POST /v1/claims", "POST /v1/batches/claims"})
"""The operations that wait up to their body's ``wait_ms``."""

REQUEST_TIMEOUT_S = 15
MAX_RESPONSE_TIME_S = 10.0
"""``max_response_time``'s limit: what ``--checks all`` uses when none is given."""

ALL_CHECKS = frozenset(
    {
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "positive_data_acceptance",
        "missing_required_header",
        "unsupported_method",
        "allow_header_conformance",
        "use_after_free",
        "ensure_resource_availability",
        "ignored_auth",
        "object_level_authorization",
    }
)
"""The checks schemathesis 4.32 registers; all are enabled, and any it adds later too."""

BEYOND_A_SCHEMA = re.compile(r"(dependencies\.\d+\.workload_id|cursor|approval\.approvers)")
"""Fields whose refusal no schema can foresee, so ``positive_data_acceptance`` is not held
to them: a dependency must name work that exists and that the caller may see (state, not
shape), a cursor must be one the server answered (opaque), and a listed approver must be
of a kind the same policy permits (a rule between two fields of a list). Every other 422
for a request the schema calls valid fails the test."""


def beyond_a_schema(response: Response | None) -> bool:
    """Whether ``response`` refuses only fields of :data:`BEYOND_A_SCHEMA`; or refuses by
    the work's state alone (``425 WORKLOAD_NOT_YET_ELIGIBLE``: work admitted with a
    ``not_before`` still ahead; schemathesis expects 409 for state, not 425); or by the
    secret scan (``422 WORKLOAD_SECRET_REJECTED``: a value that looks like a credential,
    which no schema can describe). The soak's longer runs generate both.
    """
    if response is not None and response.status_code == 425:
        return True
    if response is None or response.status_code != 422:
        return False
    try:
        error = json.loads(response.content)["error"]
        if error["code"] == "WORKLOAD_SECRET_REJECTED":
            return True
        fields = error["details"]["fields"]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(fields) and all(BEYOND_A_SCHEMA.fullmatch(str(field)) for field in fields)


TESTING_PHASES = (
    PhaseName.EXAMPLES,
    PhaseName.COVERAGE,
    PhaseName.FUZZING,
    PhaseName.STATEFUL_TESTING,
)


def error_body_shape(response: Response) -> str | None:
    """What is wrong with a 4xx answer's body, or ``None``."""
    if not 400 <= response.status_code < 500:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"{response.status_code} without a JSON body: {response.content[:200]!r}"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or set(error) != {"code", "message", "details"}:
        return f"{response.status_code} without the error body: {body!r:.200}"
    known = error["code"] in ErrorCode.__members__ or error["code"] in RouteCode.__members__
    if not known or not isinstance(error["message"], str):
        return f"{response.status_code} with an unknown code or message: {error!r:.200}"
    if response.status_code == 401 and "www-authenticate" not in response.headers:
        return "401 without WWW-Authenticate"
    return None


def cause(response: Response | None) -> str:
    """What an answer blames, to tell failures of one check on one operation apart: its
    status and, for an error body, the fields it names and why (numbers elided)."""
    if response is None:
        return "no answer"
    try:
        error = json.loads(response.content)["error"]
        fields = ",".join((error["details"] or {}).get("fields", []))
        reason = re.sub(r"\d+", "N", str(error["message"]).rsplit(": ", 1)[-1])[:60]
    except (ValueError, KeyError, TypeError, AttributeError):
        return str(response.status_code)
    return f"{response.status_code} {fields}: {reason}" if fields else f"{response.status_code}"


def bounded_long_poll(context: Any, case: Any) -> Any:
    """A schema-local ``map_case`` hook: a valid ``wait_ms`` above :data:`WAIT_MS_CAP`
    becomes the cap, so no generated claim long-polls for seconds."""
    if case.operation.label in LONG_POLLS and isinstance(case.body, dict):
        wait = case.body.get("wait_ms")
        # A whole float (29999.0) is an integer to JSON Schema and to the server too.
        if type(wait) in (int, float) and WAIT_MS_CAP < wait <= 30_000:
            case.body["wait_ms"] = WAIT_MS_CAP
    return case


def wfc_document(server: Server, owner_app: str, peer_app: str) -> dict[str, Any]:
    def user(name: str, application: str) -> dict[str, Any]:
        value = server.headers(application)["Authorization"]
        return {"name": name, "fixedHeaders": [{"name": "Authorization", "value": value}]}

    return {"auth": [user("owner", owner_app), user("peer", peer_app)]}


def redact(text: str, tokens: dict[str, str]) -> str:
    for name, token in tokens.items():
        text = text.replace(token, f"<{name} token>")
    return text


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
    load_all_checks()
    registered = set(CHECKS.get_all_names())
    assert registered >= ALL_CHECKS, ALL_CHECKS - registered

    document = wfc_document(server, app, f"{app}-peer")
    tokens = {
        entry["name"]: entry["fixedHeaders"][0]["value"].removeprefix("Bearer ")
        for entry in document["auth"]
    }
    wfc = tmp_path / "wfc-auth.json"
    wfc.write_text(json.dumps(document))
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "cache": {"enabled": False},
            # Failures print the request as sent (the tokens are redacted below).
            "output": {"sanitization": {"enabled": False}},
            "workers": 1,
            "continue-on-failure": True,
            "request-timeout": REQUEST_TIMEOUT_S,
            "generation": {
                "deterministic": True,
                "max-examples": MAX_EXAMPLES,
                "database": "none",
            },
            "checks": {"max_response_time": MAX_RESPONSE_TIME_S},
            "auth": {"wfc": {"path": str(wfc), "user": "owner", "peers": ["owner", "peer"]}},
        }
    )
    config.projects.override.checks.update(included_check_names=["all"])  # `--checks all`
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=config)
    schema.hook("map_case")(bounded_long_poll)
    enabled = schema.config.checks_config_for()
    assert all(enabled.get_by_name(name=name).enabled for name in registered)
    assert enabled.max_response_time.enabled
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 16  # the /v1 routes and the two health routes

    failures: dict[tuple[str, str, str, str], str] = {}
    occurrences: Counter[tuple[str, str, str, str]] = Counter()
    errors: list[str] = []
    phases: dict[PhaseName, Status] = {}
    ran: set[str] = set()
    statuses: dict[str, set[int]] = {}

    for event in from_schema(schema).execute():
        if isinstance(event, events.PhaseFinished):
            phases[event.phase.name] = event.status
        elif isinstance(event, events.NonFatalError):
            errors.append(f"{event.label} ({event.phase}): {event.info.format()}")
        elif isinstance(event, events.FatalError):
            errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            for failure in event.failures:  # checks that judge the whole run
                key = (failure.operation or "run", type(failure).__name__, failure.title, "")
                failures.setdefault(key, failure.message)
                occurrences[key] += 1
        elif isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for node in recorder.cases.values():
                statuses.setdefault(node.value.operation.label, set())
            for case_id, interaction in recorder.interactions.items():
                response = interaction.response
                if response is None:
                    continue
                sent = recorder.cases.get(case_id)
                label = sent.value.operation.label if sent is not None else recorder.label
                statuses.setdefault(label, set()).add(response.status_code)
                problem = error_body_shape(response)
                if problem is not None:
                    key = (label, "error_body_shape", problem, "")
                    occurrences[key] += 1
                    failures.setdefault(
                        key,
                        f"{interaction.request.method} {interaction.request.uri}\n-> {problem}",
                    )
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    ran.add(check.name)
                    info = check.failure_info
                    if info is None:
                        continue
                    failure = info.failure
                    exchange = recorder.interactions.get(failure.case_id or case_id)
                    answered = exchange.response if exchange is not None else None
                    label = failure.operation or recorder.label
                    if check.name == "positive_data_acceptance" and beyond_a_schema(answered):
                        continue
                    key = (label, check.name, failure.title, cause(answered))
                    occurrences[key] += 1
                    if key in failures:
                        continue
                    answer = (
                        f"\n-> {answered.status_code} "
                        f"{answered.content[:300].decode(errors='replace')}"
                        if answered is not None
                        else ""
                    )
                    failures[key] = (
                        f"[{event.phase.value}] {failure.message}\n{info.code_sample}{answer}"
                    )

    assert not errors, "\n\n".join(redact(error, tokens) for error in errors)
    assert not failures, redact(
        "\n\n".join(
            f"{key[0]} / {key[1]} / {key[2]} [{key[3]}] (x{occurrences[key]}):\n{text}"
            for key, text in sorted(failures.items())
        ),
        tokens,
    )
    # Every testing phase ran (the stateful one over inferred links, which the stateful
    # checks need), every check was applied, and every operation was exercised.
    # A phase's FAILURE may be only the refusals beyond a schema, forgiven above; what
    # failed otherwise is in `failures`. A phase that errored or was skipped did not run.
    outcomes = {phase.value: phases.get(phase) for phase in TESTING_PHASES}
    ran_to_the_end = (Status.SUCCESS, Status.FAILURE)
    assert all(status in ran_to_the_end for status in outcomes.values()), outcomes
    assert ran >= registered | {"max_response_time"}, registered - ran
    assert set(statuses) >= {operation.label for operation in operations}
    # The declared submission body is the real one: generated submissions are admitted.
    assert 201 in statuses["POST /v1/workloads"], statuses["POST /v1/workloads"]
    # Nothing the fuzzer sent (a revocation, say) disabled the token every request carried,
    # which would have turned the rest of the run into 401s.
    owner = {"Authorization": f"Bearer {tokens['owner']}"}
    assert httpx.get(f"{server.url}/v1/workloads", headers=owner, timeout=15).status_code == 200
