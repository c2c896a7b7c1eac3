"""What a workload's dependencies produced, for the worker that runs it.

A dependent sees the outputs of the work it depends on, and of nothing else: the
dependencies its requester declared (a workflow's ``after``, or a submission's
``dependencies``) are the whole of what its execution context reads. Each is read from the
committed rows of its tenant and application, as a claim reads it; one that has not
succeeded (it was awaited in another state, or is not there yet) has no output to give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from feltdb.records.workload import WorkloadDependency
from feltdb.storage.base import StoredRow
from feltdb.storage.canonical import canonical_json
from feltdb.work.rows import workload_of
from feltdb.work.states import WorkloadState

MAX_DEPENDENCY_OUTPUT_CHARS: Final = 4 * 1024 * 1024
"""The most characters of JSON an execution context carries of its dependencies' outputs,
in all: the outputs past it are named, not carried (read them from the work itself)."""


def dependency_outputs(
    dependencies: Sequence[WorkloadDependency], row_of: Callable[[str], StoredRow | None]
) -> tuple[dict[str, Any], list[str]]:
    """The output of each of ``dependencies`` that succeeded, by workload id, in their
    order, while their JSON stays within :data:`MAX_DEPENDENCY_OUTPUT_CHARS`; and the ids
    of the succeeded ones whose output did not fit.
    """
    outputs: dict[str, Any] = {}
    omitted: list[str] = []
    total = 0
    for dependency in dependencies:
        row = row_of(dependency.workload_id)
        if row is None:
            continue
        done = workload_of(row)
        if done.state is not WorkloadState.SUCCEEDED or done.result is None:
            continue
        size = len(canonical_json(done.result.output))
        if total + size > MAX_DEPENDENCY_OUTPUT_CHARS:
            omitted.append(done.workload_id)
            continue
        outputs[done.workload_id] = done.result.output
        total += size
    return outputs, omitted
