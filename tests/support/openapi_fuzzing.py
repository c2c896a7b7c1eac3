"""Schemathesis over a real server's ``/openapi.json``, judged one way: the pieces that
``tests/integration/server/test_openapi_fuzz.py`` (bounded, derandomized, every ``make
test``) and ``tests/reliability/test_openapi_soak.py`` (its soak, at other sizes, seeds and
backends) share, so that both hold the server to the same checks with the same forgiveness.

- :func:`registered_checks`, :func:`config_for` and :func:`load_schema`: every registered
  check enabled (``--checks all``, with ``max_response_time`` at schemathesis's own 10 s
  default), the two users of :func:`write_wfc_document` as schemathesis's own auth, and
  long-polls bounded by :func:`bounded_long_poll`;
- :func:`run_schemathesis`: the engine run over every enabled phase, each of its events
  judged (the registered checks, and ours, :func:`error_body_shape`, over every answer),
  into a :class:`FuzzOutcome` whose reports (:meth:`FuzzOutcome.errors_report`,
  :meth:`FuzzOutcome.failures_report`) print no token (:func:`redact`).

What each test asserts of the outcome (which phases must have run, how many requests,
which statuses) stays in the test.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.transport import Response
from schemathesis.engine import Status, events, from_schema
from schemathesis.engine.run import PhaseName

from feltdb.errors import ErrorCode
from feltdb.server.errors import RouteCode
from support.server import Server

SEED = 20240601
"""The seed of ``test_openapi_fuzz.py``; the soak's bounded run takes another."""

REQUEST_TIMEOUT_S = 15
MAX_RESPONSE_TIME_S = 10.0
"""``max_response_time``'s limit: what ``--checks all`` uses when none is given."""

WAIT_MS_CAP = 50
"""The longest ``wait_ms`` a generated long-poll waits (milliseconds)."""
LONG_POLLS = frozenset({"POST /v1/claims", "POST /v1/batches/claims"})
"""The operations that wait up to their body's ``wait_ms``."""

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

TESTING_PHASES = (
    PhaseName.EXAMPLES,
    PhaseName.COVERAGE,
    PhaseName.FUZZING,
    PhaseName.STATEFUL_TESTING,
)
"""The phases that send generated requests (the others probe and analyse the schema)."""

RAN_TO_THE_END = (Status.SUCCESS, Status.FAILURE)
"""The statuses of a phase that ran: its FAILURE may be only the refusals beyond a schema,
which :func:`run_schemathesis` forgives (what failed otherwise is in
:attr:`FuzzOutcome.failures`); a phase that errored or was skipped did not run."""

BEYOND_A_SCHEMA = re.compile(
    r"(dependencies\.\d+\.workload_id|cursor|approval\.approvers|Idempotency-Key"
    r"|nodes\.\d+\.(after|name))"
)
"""Fields whose refusal no schema can foresee, so ``positive_data_acceptance`` is not held
to them: a dependency must name work that exists and that the caller may see (state, not
shape), a cursor must be one the server answered (opaque), a listed approver must be of a
kind the same policy permits (a rule between two fields of a list), and an
``Idempotency-Key`` header must name the body's key when both name one (a rule between the
header and the body), and a workflow's nodes must have names of their own and run after
nodes of the workflow, in no cycle (rules between the items of a list). Every other 422
for a request the schema calls valid fails the test."""

FailureKey = tuple[str, str, str, str]
"""One distinct failure: the operation (``"run"`` for a check of the whole run), the check,
the failure's title, and what the answer blames (:func:`cause`; empty where none is told
apart)."""


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
        wait: Any = case.body.get("wait_ms")
        # A whole float (29999.0) is an integer to JSON Schema and to the server too.
        if type(wait) in (int, float) and WAIT_MS_CAP < wait <= 30_000:
            case.body["wait_ms"] = WAIT_MS_CAP
    return case


def wfc_document(server: Server, owner_app: str, peer_app: str) -> dict[str, Any]:
    """A Web Fuzzing Commons auth document of two users, each a token of all capabilities
    in its application: ``owner`` (of ``owner_app``) and ``peer`` (of ``peer_app``)."""

    def user(name: str, application: str) -> dict[str, Any]:
        value = server.headers(application)["Authorization"]
        return {"name": name, "fixedHeaders": [{"name": "Authorization", "value": value}]}

    return {"auth": [user("owner", owner_app), user("peer", peer_app)]}


def write_wfc_document(path: Path, server: Server, owner_app: str, peer_app: str) -> dict[str, str]:
    """Write :func:`wfc_document` to ``path`` (for :func:`config_for`); answers each user's
    bare token by the user's name, for :func:`redact` and for a request of the test's own."""
    document = wfc_document(server, owner_app, peer_app)
    path.write_text(json.dumps(document))
    return {
        entry["name"]: entry["fixedHeaders"][0]["value"].removeprefix("Bearer ")
        for entry in document["auth"]
    }


def redact(text: str, tokens: dict[str, str]) -> str:
    """``text`` with each of ``tokens`` replaced by its user's name."""
    for name, token in tokens.items():
        text = text.replace(token, f"<{name} token>")
    return text


def registered_checks() -> set[str]:
    """The names of every check schemathesis registers, the optional ones loaded first:
    what ``--checks all`` enables."""
    load_all_checks()
    return set(CHECKS.get_all_names())


def config_for(
    wfc: Path,
    *,
    seed: int,
    deterministic: bool,
    max_examples: int,
    phases: Collection[str] | None = None,
) -> schemathesis.Config:
    """``st run --checks all --continue-on-failure`` as a configuration: every registered
    check, ``max_response_time`` at :data:`MAX_RESPONSE_TIME_S`, the users of the Web
    Fuzzing Commons document at ``wfc`` (``owner`` sends, ``peer`` is the second user),
    one worker, no cache and no example database, ``max_examples`` per operation and mode.

    ``phases`` names the testing phases that run (by :class:`PhaseName` value, of
    :data:`TESTING_PHASES`), the others disabled; ``None`` leaves schemathesis's own
    default, every phase.
    """
    settings: dict[str, Any] = {
        "seed": seed,
        "cache": {"enabled": False},
        # Failures print the request as sent (the tokens are redacted by `redact`).
        "output": {"sanitization": {"enabled": False}},
        "workers": 1,
        "continue-on-failure": True,
        "request-timeout": REQUEST_TIMEOUT_S,
        "generation": {
            "deterministic": deterministic,
            "max-examples": max_examples,
            "database": "none",
        },
        "checks": {"max_response_time": MAX_RESPONSE_TIME_S},
        "auth": {"wfc": {"path": str(wfc), "user": "owner", "peers": ["owner", "peer"]}},
    }
    if phases is not None:
        settings["phases"] = {
            phase.value: {"enabled": phase.value in phases} for phase in TESTING_PHASES
        }
    config = schemathesis.Config.from_dict(settings)
    config.projects.override.checks.update(included_check_names=["all"])  # `--checks all`
    return config


def load_schema(server: Server, config: schemathesis.Config) -> schemathesis.BaseSchema:
    """``server``'s ``/openapi.json`` under ``config``, with :func:`bounded_long_poll` as
    its ``map_case`` hook."""
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=config)
    schema.hook("map_case")(bounded_long_poll)
    return schema


def operations_of(
    schema: schemathesis.BaseSchema,
) -> list[schemathesis.APIOperation[Any, Any, Any, Any]]:
    """Every operation ``schema`` declares; one it cannot build raises (``Err`` has no
    ``ok``), so none is left out unnoticed."""
    return [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]


@dataclass
class FuzzOutcome:
    """What :func:`run_schemathesis` found in one run of the engine."""

    failures: dict[FailureKey, str] = field(default_factory=dict)
    """Each distinct failure not forgiven, with the text of its first occurrence."""
    occurrences: Counter[FailureKey] = field(default_factory=Counter)
    """How many times each of :attr:`failures` occurred."""
    errors: list[str] = field(default_factory=list)
    """The engine's own errors, fatal or not (a check that could not run, say)."""
    phases: dict[PhaseName, Status] = field(default_factory=dict)
    """Each phase that finished, with its status."""
    ran: set[str] = field(default_factory=set)
    """The checks applied to at least one answer."""
    statuses: dict[str, set[int]] = field(default_factory=dict)
    """Each operation exercised (by label), with the statuses it answered (empty if none of
    its requests got an answer)."""
    examples: int = 0
    """The requests sent that got an answer."""

    def count(self, key: FailureKey) -> bool:
        """Count one occurrence of ``key``; whether it is the first, whose text is kept."""
        self.occurrences[key] += 1
        return key not in self.failures

    def phase_outcomes(self, wanted: Iterable[PhaseName]) -> dict[str, Status | None]:
        """The status of each ``wanted`` phase by its value, ``None`` for one that never
        finished."""
        return {phase.value: self.phases.get(phase) for phase in wanted}

    def errors_report(self, tokens: dict[str, str]) -> str:
        """:attr:`errors`, one paragraph each, without ``tokens`` (:func:`redact`)."""
        return "\n\n".join(redact(error, tokens) for error in self.errors)

    def failures_report(self, tokens: dict[str, str]) -> str:
        """:attr:`failures` sorted, each with its key and count, without ``tokens``."""
        return redact(
            "\n\n".join(
                f"{key[0]} / {key[1]} / {key[2]} [{key[3]}] (x{self.occurrences[key]}):\n{text}"
                for key, text in sorted(self.failures.items())
            ),
            tokens,
        )


def run_schemathesis(schema: schemathesis.BaseSchema) -> FuzzOutcome:
    """Run the schemathesis engine over ``schema`` (its configured phases and checks) to
    the end and judge every event: the engine's errors, the failures of the checks that
    judge the whole run, and of each finished scenario what :func:`judge_scenario` finds.
    Nothing is asserted: the caller asserts of the :class:`FuzzOutcome`.
    """
    outcome = FuzzOutcome()
    for event in from_schema(schema).execute():
        if isinstance(event, events.PhaseFinished):
            outcome.phases[event.phase.name] = event.status
        elif isinstance(event, events.NonFatalError):
            outcome.errors.append(f"{event.label} ({event.phase}): {event.info.format()}")
        elif isinstance(event, events.FatalError):
            outcome.errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            for failure in event.failures:  # checks that judge the whole run
                key = (failure.operation or "run", type(failure).__name__, failure.title, "")
                if outcome.count(key):
                    outcome.failures[key] = failure.message
        elif isinstance(event, events.ScenarioFinished):
            judge_scenario(event, outcome)
    return outcome


def judge_scenario(event: events.ScenarioFinished, outcome: FuzzOutcome) -> None:
    """Add to ``outcome`` what one finished scenario shows: the operations it exercised and
    the statuses they answered, the requests answered, a failure for each answer of the
    wrong error-body shape (:func:`error_body_shape`), the checks applied, and a failure for
    each check that failed, except ``positive_data_acceptance`` refusing what is
    :func:`beyond_a_schema`."""
    recorder = event.recorder
    for node in recorder.cases.values():
        outcome.statuses.setdefault(node.value.operation.label, set())
    for case_id, interaction in recorder.interactions.items():
        response = interaction.response
        if response is None:
            continue
        outcome.examples += 1
        sent = recorder.cases.get(case_id)
        label = sent.value.operation.label if sent is not None else recorder.label
        outcome.statuses.setdefault(label, set()).add(response.status_code)
        problem = error_body_shape(response)
        if problem is not None:
            key = (label, "error_body_shape", problem, "")
            if outcome.count(key):
                outcome.failures[key] = (
                    f"{interaction.request.method} {interaction.request.uri}\n-> {problem}"
                )
    for case_id, checks in recorder.checks.items():
        for check in checks:
            outcome.ran.add(check.name)
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
            if not outcome.count(key):
                continue
            answer = (
                f"\n-> {answered.status_code} {answered.content[:300].decode(errors='replace')}"
                if answered is not None
                else ""
            )
            outcome.failures[key] = (
                f"[{event.phase.value}] {failure.message}\n{info.code_sample}{answer}"
            )
