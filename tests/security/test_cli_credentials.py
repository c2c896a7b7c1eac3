"""Point 1, at the command line: ``feltdb show --json`` and ``ls --json`` on a store show no
signature, and the grant a ``--db`` operator acts under is short and narrow.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import invoke

from feltdb import WorkloadStore
from feltdb.auth.policy import SUBMIT

REDACTED = "redacted"
OPERATOR_GRANT_LIFETIME_S = 300  # five minutes, as the README says


def test_the_command_line_shows_no_signature_and_mints_short_narrow_grants(tmp_path: Path):
    db = str(tmp_path / "work.db")
    submitted = invoke("submit", "send", "--input", '{"to": "ada"}', "--db", db, "--json")
    assert submitted.exit_code == 0, submitted.output
    answer = json.loads(submitted.stdout)
    workload_id = answer["workload"]["workload_id"]
    assert answer["workload"]["authorization_snapshot"]["signature"] == REDACTED
    shown = invoke("show", workload_id, "--db", db, "--json")
    assert json.loads(shown.stdout)["authorization_snapshot"]["signature"] == REDACTED
    listed = json.loads(invoke("ls", "--db", db, "--json").stdout)
    assert [w["workload_id"] for w in listed] == [workload_id]
    assert "authorization_snapshot" not in listed[0]  # a list shows summaries
    # What was stored: the operator's grant held only what submitting needs, for minutes.
    with WorkloadStore.open(db) as store:
        grant = store.get(workload_id).authorization_snapshot.grant
    assert grant.capabilities == {SUBMIT}
    assert grant.expires_at - grant.issued_at == OPERATOR_GRANT_LIFETIME_S <= 300
