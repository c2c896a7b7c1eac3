"""Issue 13, input in the soak: schemathesis over the real server's ``/openapi.json`` with
the checks of ``tests/integration/server/test_openapi_fuzz.py``, many more examples in the
long run, and a small but real run otherwise.

That file fixes its size in module constants (``MAX_EXAMPLES = 5``, ``SEED``, derandomized
generation) that nothing outside it sets, so this module drives schemathesis itself with
*that module's own* pieces, loaded from its path: the same list of checks (every registered
one, ``--checks all``, with ``max_response_time`` at schemathesis's default), the same
error-body check over every answer (:func:`error_body_shape`), the same forgiveness for the
refusals no schema can foresee (:func:`beyond_a_schema`), the same bound on long-polls
(:func:`bounded_long_poll`) and the same two users (``owner`` and ``peer``, as a Web Fuzzing
Commons document). What differs is the size, the randomness and the backends:

- **soak** (``FELTDB_SOAK=1``): every phase (examples, coverage, fuzzing, stateful),
  :data:`SOAK_EXAMPLES` examples per operation and mode, seeded generation (not
  derandomized) from a random seed printed at the start (``FELTDB_FUZZ_SEED`` replays
  one), on SQLite and on PostgreSQL (the original runs SQLite only); every phase must run
  and every check be applied, as in the original;
- **bounded**: the fuzzing phase only, :data:`BOUNDED_EXAMPLES` examples per operation and
  mode, on both backends, from a seed other than the original's (and seeded, where the
  original is derandomized, so it generates other requests), every check applied as in
  the original. The examples and coverage phases enumerate the schema, which the original
  already does on every ``make test``, so the bounded run does not repeat them; nor the
  stateful phase, which the original runs.

Each run records ``record("input", "schemathesis", backend, operations=..., examples=...,
failures=..., command="make soak")``: the operations exercised, the requests schemathesis
sent, and the distinct failures (none may be).

What is NOT covered: anything beyond what schemathesis generates from the schema (the
security soak, ``test_security_soak.py``, attacks with real ids and forged tokens), and
concurrency (one worker).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.engine import Status, events, from_schema
from schemathesis.engine.run import PhaseName
from support.server import Server, serve
from support.soak import SOAK, record, scaled

FUZZ_FILE = Path(__file__).parents[1] / "integration" / "server" / "test_openapi_fuzz.py"


def load_fuzz_module() -> ModuleType:
    """``test_openapi_fuzz.py`` as a module of its own name here (not collected again)."""
    spec = importlib.util.spec_from_file_location("openapi_fuzz_checks", FUZZ_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fuzz = load_fuzz_module()

SOAK_EXAMPLES = 50
"""Examples per operation and generation mode in the soak (ten times the original's 5)."""
BOUNDED_EXAMPLES = 5
SEED = int(os.environ.get("FELTDB_FUZZ_SEED") or (secrets.randbits(32) if SOAK else fuzz.SEED + 1))
"""The soak's seed is random, the bounded run's fixed and another than the original's (which
derandomizes anyway); either is printed, and ``FELTDB_FUZZ_SEED`` replaces it."""
PHASES = ("examples", "coverage", "fuzzing", "stateful") if SOAK else ("fuzzing",)


@pytest.fixture
def api_server(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    """A server of this test's own, on this run's backend."""
    home = tmp_path_factory.mktemp(f"openapi-soak-{backend}")
    if backend != "postgres":
        yield from serve(home, backend=backend)
        return
    pg_databases = request.getfixturevalue("pg_databases")
    database = pg_databases.create("openapi_soak")
    try:
        yield from serve(home, pg_databases.url_of(database), backend=backend)
    finally:
        pg_databases.drop(database)


def config_for(wfc: Path, seed: int) -> schemathesis.Config:
    """The original's configuration, at this run's size, seed and phases."""
    config = schemathesis.Config.from_dict(
        {
            "seed": seed,
            "cache": {"enabled": False},
            "output": {"sanitization": {"enabled": False}},
            "workers": 1,
            "continue-on-failure": True,
            "request-timeout": fuzz.REQUEST_TIMEOUT_S,
            "generation": {
                "deterministic": False,
                "max-examples": scaled(BOUNDED_EXAMPLES, SOAK_EXAMPLES),
                "database": "none",
            },
            "phases": {name: {"enabled": name in PHASES} for name in fuzz_phase_names()},
            "checks": {"max_response_time": fuzz.MAX_RESPONSE_TIME_S},
            "auth": {"wfc": {"path": str(wfc), "user": "owner", "peers": ["owner", "peer"]}},
        }
    )
    config.projects.override.checks.update(included_check_names=["all"])  # `--checks all`
    return config


def fuzz_phase_names() -> list[str]:
    return [phase.value.lower() for phase in fuzz.TESTING_PHASES]


def test_schemathesis_finds_no_failure_at_the_soaks_size(
    api_server: Server, backend: str, tmp_path: Path
) -> None:
    server = api_server
    seed = SEED
    print(f"schemathesis soak: seed {seed}, phases {PHASES}, {backend}")
    load_all_checks()
    registered = set(CHECKS.get_all_names())
    assert registered >= fuzz.ALL_CHECKS, fuzz.ALL_CHECKS - registered

    document = fuzz.wfc_document(server, "fuzz-app", "fuzz-app-peer")
    tokens = {
        entry["name"]: entry["fixedHeaders"][0]["value"].removeprefix("Bearer ")
        for entry in document["auth"]
    }
    wfc = tmp_path / "wfc-auth.json"
    wfc.write_text(json.dumps(document))
    schema = schemathesis.openapi.from_url(
        f"{server.url}/openapi.json", config=config_for(wfc, seed)
    )
    schema.hook("map_case")(fuzz.bounded_long_poll)
    enabled = schema.config.checks_config_for()
    assert all(enabled.get_by_name(name=name).enabled for name in registered)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 16

    failures: dict[tuple[str, str, str, str], str] = {}
    occurrences: Counter[tuple[str, str, str, str]] = Counter()
    errors: list[str] = []
    phases: dict[PhaseName, Status] = {}
    ran: set[str] = set()
    statuses: dict[str, set[int]] = {}
    examples = 0
    started = time.monotonic()

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
            examples += scenario(event, failures, occurrences, ran, statuses)

    seconds = round(time.monotonic() - started, 1)
    record(
        "input",
        "schemathesis",
        backend,
        seed=seed,
        phases=list(PHASES),
        max_examples=scaled(BOUNDED_EXAMPLES, SOAK_EXAMPLES),
        operations=len(statuses),
        examples=examples,
        failures=len(failures) + len(errors),
        seconds=seconds,
        command="make soak",
    )
    print(
        f"schemathesis ({backend}): {len(statuses)} operations, {examples} requests,"
        f" {len(ran)} checks applied, {seconds}s"
    )
    assert not errors, "\n\n".join(fuzz.redact(error, tokens) for error in errors)
    assert not failures, fuzz.redact(
        "\n\n".join(
            f"{key[0]} / {key[1]} / {key[2]} [{key[3]}] (x{occurrences[key]}):\n{text}"
            for key, text in sorted(failures.items())
        ),
        tokens,
    )
    wanted = {phase for phase in fuzz.TESTING_PHASES if phase.value.lower() in PHASES}
    outcomes = {phase.value: phases.get(phase) for phase in wanted}
    assert all(status in (Status.SUCCESS, Status.FAILURE) for status in outcomes.values()), outcomes
    assert set(statuses) >= {operation.label for operation in operations}
    assert examples >= len(operations) * (1 if not SOAK else SOAK_EXAMPLES // 10)
    assert ran >= registered | {"max_response_time"}, registered - ran  # each one applied
    assert 201 in statuses["POST /v1/workloads"], statuses["POST /v1/workloads"]
    owner = {"Authorization": f"Bearer {tokens['owner']}"}
    assert httpx.get(f"{server.url}/v1/workloads", headers=owner, timeout=15).status_code == 200


def scenario(
    event: Any,
    failures: dict[tuple[str, str, str, str], str],
    occurrences: Counter[tuple[str, str, str, str]],
    ran: set[str],
    statuses: dict[str, set[int]],
) -> int:
    """Judge one finished scenario as the original does; answers the requests it sent."""
    recorder = event.recorder
    sent = 0
    for node in recorder.cases.values():
        statuses.setdefault(node.value.operation.label, set())
    for case_id, interaction in recorder.interactions.items():
        response = interaction.response
        if response is None:
            continue
        sent += 1
        case = recorder.cases.get(case_id)
        label = case.value.operation.label if case is not None else recorder.label
        statuses.setdefault(label, set()).add(response.status_code)
        problem = fuzz.error_body_shape(response)
        if problem is not None:
            key = (label, "error_body_shape", problem, "")
            occurrences[key] += 1
            failures.setdefault(
                key, f"{interaction.request.method} {interaction.request.uri}\n-> {problem}"
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
            if check.name == "positive_data_acceptance" and fuzz.beyond_a_schema(answered):
                continue
            key = (label, check.name, failure.title, fuzz.cause(answered))
            occurrences[key] += 1
            if key in failures:
                continue
            answer = (
                f"\n-> {answered.status_code} {answered.content[:300].decode(errors='replace')}"
                if answered is not None
                else ""
            )
            failures[key] = f"[{event.phase.value}] {failure.message}\n{info.code_sample}{answer}"
    return sent
