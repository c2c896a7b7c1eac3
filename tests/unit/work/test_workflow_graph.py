"""A workflow's shape, decided before anything is written (pure functions)."""

from __future__ import annotations

import pytest

from feltdb import WorkloadState
from feltdb.records.workflow import RunState
from feltdb.work.workflow_graph import node_fields, run_state

S = WorkloadState


def test_a_node_without_a_key_gets_one_from_the_workflow_s_key_and_its_name():
    assert node_fields("nightly", "load", {})["idempotency_key"] == "nightly/load"
    assert node_fields("nightly", "load", {"idempotency_key": "mine"})["idempotency_key"] == "mine"
    long = node_fields("k" * 256, "n" * 256, {})["idempotency_key"]
    assert long.startswith("workflow-") and len(long) <= 256
    assert long == node_fields("k" * 256, "n" * 256, {})["idempotency_key"], "the same again"
    assert long != node_fields("k" * 256, "m" * 256, {})["idempotency_key"]


@pytest.mark.parametrize(
    "states,run",
    [
        ([S.SUCCEEDED, S.SUCCEEDED], RunState.SUCCEEDED),
        ([S.SUCCEEDED, S.READY], RunState.RUNNING),
        ([S.SUCCEEDED, None], RunState.RUNNING),
        ([S.SUCCEEDED, S.DEAD_LETTER, S.CANCELLED], RunState.FAILED),
        ([S.REJECTED, S.CANCELLED], RunState.FAILED),
        ([S.SUCCEEDED, S.CANCELLED], RunState.CANCELLED),
        ([S.DEAD_LETTER, S.RUNNING], RunState.RUNNING),
    ],
)
def test_a_run_rests_once_every_node_does(states, run):
    assert run_state(states) is run
