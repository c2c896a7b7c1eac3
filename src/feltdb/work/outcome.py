"""What a decision answers: the workload as it decided it, and the answer of the command.

Every decision of the authority (:mod:`feltdb.work.lifecycle`, :mod:`feltdb.work.operators`,
:mod:`feltdb.work.recovery`) is a function ``(workload, command…, now) -> Outcome`` or a
refusal (``WorkloadError``). It edits nothing: the records are frozen, and the outcome's
workload is a new record that shares with the one decided on every part the decision did
not change. The caller commits the new record guarded by the version the old one was read
at, or, having been refused, commits nothing; a batch's later item decides on the outcome
of an earlier one as it is, with no copy to protect the committed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from feltdb.records.workload import Workload

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """A decision's new workload and its answer to the command."""

    workload: Workload
    """The workload as decided (to be committed)."""
    answer: T
    """What the command answers once the workload is committed."""
