"""The acknowledgement log of the crash suite's children (``tests/reliability/test_sigkill.py``).

A child appends one line per acknowledged item as soon as the call that acknowledged it
returned, before it does anything else; each batch of lines is one ``write`` to a file
opened ``O_APPEND``, so a SIGKILL leaves at most a last line without its newline, which
:func:`whole_lines` leaves out. The format is :mod:`support.batch_child`'s, extended:

- ``admitted <workload id> <idempotency key> [created|replayed]``;
- ``completed <workload id> <result id>``;
- ``checkpointed <workload id> <checkpoint id> <state hash>``;
- ``failed <workload id> <claim id> <state it led to>``;
- ``refused <workload id> <code> [<operation>]``: a call refused that should not have
  been (the test fails on any);
- ``unanswered <operation> <status>``: a request that got no answer (the server was killed
  under it); not an acknowledgement of anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def open_log(path: str | Path) -> int:
    """The log's descriptor, for appending."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


def append(log: int, lines: Sequence[str]) -> None:
    """Append ``lines`` in one write (acknowledged before anything else is done)."""
    if lines:
        os.write(log, "".join(f"{line}\n" for line in lines).encode("utf-8"))


def whole_lines(path: Path) -> list[list[str]]:
    """The log's whole lines, split; a last line the kill cut short is left out."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    whole = text[: text.rfind("\n") + 1]
    return [line.split(" ") for line in whole.splitlines()]
