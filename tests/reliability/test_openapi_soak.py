"""Issue 13, input in the soak: schemathesis over the real server's ``/openapi.json`` with
the checks of ``tests/integration/server/test_openapi_fuzz.py``, many more examples in the
long run, and a small but real run otherwise.

That file fixes its size in module constants (``MAX_EXAMPLES = 5``, ``SEED``, derandomized
generation) that nothing outside it sets, so this module drives schemathesis itself with
the pieces both share, ``support/openapi_fuzzing.py``: the same list of checks (every
registered one, ``--checks all``, with ``max_response_time`` at schemathesis's default), the
same error-body check over every answer (:func:`error_body_shape`), the same forgiveness for
the refusals no schema can foresee (:func:`beyond_a_schema`), the same bound on long-polls
(:func:`bounded_long_poll`), the same two users (``owner`` and ``peer``, as a Web Fuzzing
Commons document) and the same judging of every event (:func:`run_schemathesis`). What
differs is the size, the randomness and the backends:

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

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.openapi_fuzzing import (
    ALL_CHECKS,
    RAN_TO_THE_END,
    TESTING_PHASES,
    config_for,
    load_schema,
    operations_of,
    registered_checks,
    run_schemathesis,
    write_wfc_document,
)
from support.openapi_fuzzing import SEED as ORIGINAL_SEED
from support.server import Server, serve
from support.soak import SOAK, record, scaled

SOAK_EXAMPLES = 50
"""Examples per operation and generation mode in the soak (ten times the original's 5)."""
BOUNDED_EXAMPLES = 5
SEED = int(
    os.environ.get("FELTDB_FUZZ_SEED") or (secrets.randbits(32) if SOAK else ORIGINAL_SEED + 1)
)
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


def test_schemathesis_finds_no_failure_at_the_soaks_size(
    api_server: Server, backend: str, tmp_path: Path
) -> None:
    server = api_server
    seed = SEED
    print(f"schemathesis soak: seed {seed}, phases {PHASES}, {backend}")
    registered = registered_checks()
    assert registered >= ALL_CHECKS, ALL_CHECKS - registered

    wfc = tmp_path / "wfc-auth.json"
    tokens = write_wfc_document(wfc, server, "fuzz-app", "fuzz-app-peer")
    # The original's configuration, at this run's size, seed and phases.
    config = config_for(
        wfc,
        seed=seed,
        deterministic=False,
        max_examples=scaled(BOUNDED_EXAMPLES, SOAK_EXAMPLES),
        phases=PHASES,
    )
    schema = load_schema(server, config)
    enabled = schema.config.checks_config_for()
    assert all(enabled.get_by_name(name=name).enabled for name in registered)
    operations = operations_of(schema)
    assert len(operations) >= 16

    started = time.monotonic()
    outcome = run_schemathesis(schema)
    seconds = round(time.monotonic() - started, 1)

    statuses, examples = outcome.statuses, outcome.examples
    record(
        "input",
        "schemathesis",
        backend,
        seed=seed,
        phases=list(PHASES),
        max_examples=scaled(BOUNDED_EXAMPLES, SOAK_EXAMPLES),
        operations=len(statuses),
        examples=examples,
        failures=len(outcome.failures) + len(outcome.errors),
        seconds=seconds,
        command="make soak",
    )
    print(
        f"schemathesis ({backend}): {len(statuses)} operations, {examples} requests,"
        f" {len(outcome.ran)} checks applied, {seconds}s"
    )
    assert not outcome.errors, outcome.errors_report(tokens)
    assert not outcome.failures, outcome.failures_report(tokens)
    outcomes = outcome.phase_outcomes(phase for phase in TESTING_PHASES if phase.value in PHASES)
    assert all(status in RAN_TO_THE_END for status in outcomes.values()), outcomes
    assert set(statuses) >= {operation.label for operation in operations}
    assert examples >= len(operations) * (1 if not SOAK else SOAK_EXAMPLES // 10)
    assert outcome.ran >= registered | {"max_response_time"}, registered - outcome.ran
    assert 201 in statuses["POST /v1/workloads"], statuses["POST /v1/workloads"]
    owner = {"Authorization": f"Bearer {tokens['owner']}"}
    assert httpx.get(f"{server.url}/v1/workloads", headers=owner, timeout=15).status_code == 200
