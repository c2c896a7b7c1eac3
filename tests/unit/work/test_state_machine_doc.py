"""docs/state_machine.md draws exactly the transitions of feltdb.work.transitions."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from feltdb import WorkloadState, can_transition
from feltdb.work.states import TERMINAL_STATES
from feltdb.work.transitions import LEGAL_TRANSITIONS

DOC = Path(__file__).resolve().parents[3] / "docs" / "state_machine.md"

_EDGE = re.compile(r"^(?P<src>\[\*\]|[A-Z_]+)\s*-->\s*(?P<dst>\[\*\]|[A-Z_]+)\s*(?::.*)?$")
_ROW = re.compile(r"^\|\s*`(?P<state>[A-Z_]+)`\s*\|")


def mermaid_block(text: str) -> list[str]:
    blocks = re.findall(r"^```mermaid\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, f"expected exactly one mermaid block, found {len(blocks)}"
    return [line.strip() for line in blocks[0].splitlines() if line.strip()]


def parse_edges(lines: list[str]) -> list[tuple[str, str]]:
    """The FROM --> TO edges of a stateDiagram-v2, without the [*] pseudo-state."""
    assert lines[0] == "stateDiagram-v2", "the diagram must be a stateDiagram-v2"
    edges: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line.startswith("%%"):
            continue
        match = _EDGE.match(line)
        assert match is not None, f"unparsed line in the diagram: {line!r}"
        if "[*]" in (match["src"], match["dst"]):
            continue
        edges.append((match["src"], match["dst"]))
    return edges


@pytest.fixture(scope="module")
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def doc_edges(doc_text: str) -> set[tuple[WorkloadState, WorkloadState]]:
    edges = parse_edges(mermaid_block(doc_text))
    assert len(edges) == len(set(edges)), "the diagram lists an edge twice"
    return {(WorkloadState(src), WorkloadState(dst)) for src, dst in edges}


def test_the_parser_reads_edges_labels_and_skips_the_start_marker():
    lines = [
        "stateDiagram-v2",
        "[*] --> CREATED",
        "CREATED --> READY : admitted",
        "READY-->CLAIMED",
    ]
    assert parse_edges(lines) == [("CREATED", "READY"), ("READY", "CLAIMED")]


def test_the_parser_refuses_a_line_it_does_not_understand():
    with pytest.raises(AssertionError, match="unparsed"):
        parse_edges(["stateDiagram-v2", "READY -> CLAIMED"])


def test_the_diagram_draws_exactly_the_legal_transitions(doc_edges):
    missing = LEGAL_TRANSITIONS - doc_edges
    extra = doc_edges - LEGAL_TRANSITIONS
    assert not missing, f"legal but not drawn: {sorted(missing)}"
    assert not extra, f"drawn but not legal: {sorted(extra)}"


def test_the_diagram_starts_at_created(doc_text):
    assert "[*] --> CREATED" in mermaid_block(doc_text)


@pytest.mark.parametrize(
    ("from_state", "to_state"), list(itertools.product(WorkloadState, WorkloadState))
)
def test_can_transition_agrees_with_the_diagram(doc_edges, from_state, to_state):
    assert can_transition(from_state, to_state) is ((from_state, to_state) in doc_edges)


def test_every_state_appears_in_the_diagram(doc_edges):
    drawn = {state for edge in doc_edges for state in edge}
    assert drawn == set(WorkloadState)


@pytest.mark.parametrize(
    "terminal", [WorkloadState.SUCCEEDED, WorkloadState.CANCELLED, WorkloadState.REJECTED]
)
def test_a_terminal_state_has_no_outgoing_edge(doc_edges, terminal):
    assert terminal in TERMINAL_STATES
    assert [edge for edge in doc_edges if edge[0] is terminal] == []
    assert not any(can_transition(terminal, to) for to in WorkloadState)


def test_only_the_terminal_states_have_no_outgoing_edge(doc_edges):
    sinks = set(WorkloadState) - {src for src, _ in doc_edges}
    assert sinks == {WorkloadState.SUCCEEDED, WorkloadState.CANCELLED, WorkloadState.REJECTED}
    assert sinks == TERMINAL_STATES


def test_the_state_table_describes_every_state_once(doc_text):
    rows = [m["state"] for line in doc_text.splitlines() if (m := _ROW.match(line))]
    assert sorted(rows) == sorted(state.value for state in WorkloadState)
