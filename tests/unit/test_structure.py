"""Small parts: modules of about 400 lines at most, functions of 60 (docs/style.md, principle 1).

A facade may be longer, because of its docstrings (each public method documents what it
promises and what it refuses), never because of logic: the facades are named here, each
with the reason. A function's length counts its signature and docstring too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "feltdb"

MAX_MODULE_LINES = 420
"""About 400: a module past this does more than one job."""
MAX_FUNCTION_LINES = 60
MAX_FACADE_LINES = 600
"""A facade documents every operation it offers, and decides none of them."""

FACADES = {
    "work/store.py": "WorkloadStore, the authority's facade: one documented method per"
    " operation of docs/api.md, each a load, a pure decision and one guarded commit",
}


def sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def relative(path: Path) -> str:
    return str(path.relative_to(SRC))


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_the_facades_named_exist():
    assert all((SRC / name).exists() for name in FACADES)


@pytest.mark.parametrize("path", sources(), ids=relative)
def test_a_module_does_one_job(path):
    if relative(path) in FACADES:
        return
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{relative(path)} has {lines} lines"


@pytest.mark.parametrize("name", sorted(FACADES))
def test_a_facade_is_thin(name):
    """Its methods hand each call to the modules that decide it: it has no loop, no
    ``try`` and no branch of its own, and fits in :data:`MAX_FACADE_LINES` lines.
    """
    text = (SRC / name).read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_FACADE_LINES
    logic = [
        f"{type(node).__name__} at line {node.lineno}"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.For | ast.While | ast.Try | ast.If | ast.With)
    ]
    assert logic == []


@pytest.mark.parametrize("path", sources(), ids=relative)
def test_a_function_fits_on_a_screen(path):
    assert long_functions(path) == []


def test_the_checker_measures_a_function_from_its_signature_to_its_end(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("def f(\n    x,\n):\n" + "    x += 1\n" * 60 + "    return x\n")
    assert long_functions(long) == ["f (line 1): 64 lines"]
