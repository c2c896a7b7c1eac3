"""What the commands parse beyond typer's types: subjects, JSON input, instants.

Each parser refuses with the exception a command reports: :class:`~feltdb.errors.WorkloadError`
for a subject (the command names the option), :class:`typer.BadParameter` (exit 2) for
the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from feltdb.errors import ErrorCode, WorkloadError

if TYPE_CHECKING:
    from feltdb.auth import Subject


def parse_subject(text: str) -> Subject:
    """Parse ``KIND:ID`` (e.g. ``worker:w1``) into a subject.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for an unknown kind or an empty id.
    """
    # Imported here, as every command module imports what a command runs: the records
    # (pydantic, msgspec) are no part of --help.
    from feltdb.auth.subjects import Subject, SubjectKind
    from feltdb.fields import MAX_ID_CHARS

    kind, _, subject_id = text.partition(":")
    kinds = ", ".join(k.value for k in SubjectKind)
    if kind not in {k.value for k in SubjectKind} or not subject_id:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, f"a subject is KIND:ID with KIND one of {kinds}: {text!r}"
        )
    if len(subject_id) > MAX_ID_CHARS:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, f"a subject's id is at most {MAX_ID_CHARS} characters"
        )
    return Subject(kind=SubjectKind(kind), id=subject_id)


def subject_option(text: str, option: str) -> Subject:
    """:func:`parse_subject` of the value of ``option``: a usage error (exit 2) naming it."""
    try:
        return parse_subject(text)
    except WorkloadError as error:
        raise typer.BadParameter(error.message, param_hint=option) from None


def parse_input(text: str) -> Any:
    """``text`` as JSON, or the JSON of the file ``@PATH`` names.

    Raises:
        typer.BadParameter: not JSON, or the file cannot be read (exit 2).
    """
    source = "--input"
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise typer.BadParameter(
                f"cannot read {path}: {error.strerror or error}", param_hint=source
            ) from None
        source = f"--input ({path})"
    try:
        return json.loads(text, parse_constant=_not_a_json_number, parse_float=_finite)
    except (ValueError, RecursionError) as error:
        raise typer.BadParameter(f"not JSON: {error}", param_hint=source) from None


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a JSON number")
    return value


def _not_a_json_number(name: str) -> Any:
    # Python's json reads NaN and Infinity, which JSON has not: refuse them here, where a
    # person can fix the command, not at the server (issue 10, point 3).
    raise ValueError(f"{name} is not a JSON number")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_not_before(text: str, now: int) -> int:
    """An instant: unix seconds (``1767225600``), or from ``now`` (``+30s``, ``+5m``,
    ``+2h``, ``+1d``; a bare ``+90`` is seconds).

    Raises:
        typer.BadParameter: anything else (exit 2).
    """
    if text.isdigit():
        return int(text)
    if text.startswith("+"):
        amount, unit = text[1:], "s"
        if amount[-1:] in _UNITS:
            amount, unit = amount[:-1], amount[-1]
        if amount.isdigit():
            return now + int(amount) * _UNITS[unit]
    raise typer.BadParameter(
        f"{text!r} is neither unix seconds nor +N[s|m|h|d]", param_hint="--not-before"
    )
