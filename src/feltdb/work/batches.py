"""Batches: many operations of one kind decided one by one and committed together.

A batch (``admit_many``, ``complete_many``, ``heartbeat_many``) decides each item exactly
as the single call would, on what the store holds *and* what the batch's earlier items
planned (so two items on one workload chain, as two calls in a row would), then commits
every planned change in one transaction (``Database.commit_many``). Answers are per item,
in order: an item's refusal, or its lost guard, refuses no other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload
from feltdb.storage.base import Commit, Database, Mutation, PlannedCommit, Precondition
from feltdb.work.changes import Operation
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.rows import CREATED, MUTATED, LoadedWorkload, holding, planned_commit

T = TypeVar("T")
Item = TypeVar("Item")


@dataclass(frozen=True, slots=True)
class Completion:
    """One item of ``complete_many``: the arguments of ``complete``."""

    workload_id: str
    claim_id: str
    worker: str
    fencing_token: int
    result_id: str
    output: Any
    artifacts: Iterable[str] = ()
    schema_version: int = 1


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One item of ``heartbeat_many``: the arguments of ``heartbeat``."""

    workload_id: str
    claim_id: str
    worker: str
    fencing_token: int
    extend_ms: int = DEFAULT_LEASE_MS


@dataclass(slots=True)
class Step(Generic[T]):
    """One operation decided on a loaded workload: the change to commit (``loaded``, when
    there is one), and then the answer, or the refusal to raise once the change is
    committed (a deadline found passed is committed as a timeout, then refused).
    """

    loaded: LoadedWorkload | None = None
    operation: Operation | None = None
    answer: T | None = None
    refusal: WorkloadError | None = None
    depends_on: str | None = None
    """The workload whose commit in this batch the answer stands on (an item repeating an
    earlier item's admission key is answered by that admission, if it commits)."""
    held: tuple[Precondition, ...] = ()
    """Guards of rows the decision read besides the workload (its dependencies, a
    concurrency slot), at the versions read: the change commits only while each is as read."""
    also: tuple[Mutation, ...] = ()
    """Rows the change writes besides the workload (a concurrency slot; guarded in
    :attr:`held`)."""


Prepared = TypeVar("Prepared")
Answer = TypeVar("Answer")


def per_item(
    items: Sequence[Item],
    prepare: Callable[[Item], Prepared],
    run: Callable[[list[Prepared]], Sequence[Answer | WorkloadError]],
) -> list[Answer | WorkloadError]:
    """Each item prepared (``prepare`` refusing it, or making what ``run`` takes), the
    prepared ones given to ``run`` (one call), and the answers in the items' order.
    """
    prepared: list[Prepared | WorkloadError] = []
    for item in items:
        try:
            prepared.append(prepare(item))
        except WorkloadError as refusal:
            prepared.append(refusal)
    ready = [entry for entry in prepared if not isinstance(entry, WorkloadError)]
    answers = iter(run(ready) if ready else ())
    return [entry if isinstance(entry, WorkloadError) else next(answers) for entry in prepared]


Notify = Callable[[Operation, LoadedWorkload | None, Workload], None]
Remember = Callable[[PlannedCommit, Workload, int], None]
"""Told of each workload a batch committed: its plan, the workload, the version written."""
CommitMany = Callable[[list[PlannedCommit]], "Sequence[Commit | WorkloadError]"]
"""Commits a batch's plans in one transaction: per plan, its commit, its lost guard
(``StorageConflict``) or its refusal."""


@dataclass
class Batch:
    """The changes a batch planned so far, and what its later items must see of them."""

    db: Database
    read: Callable[[str], LoadedWorkload]
    """The committed workload of an id (refusing what is missing or out of scope)."""
    pending: dict[str, LoadedWorkload] = field(default_factory=dict)
    results: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """Result ids this batch records, and the workload of each."""

    def load(self, workload_id: str) -> LoadedWorkload:
        """The workload as the batch leaves it so far: what an earlier item planned (as it
        is: a decision edits nothing, so a refused item leaves nothing behind), else the
        committed one.
        """
        planned = self.pending.get(workload_id)
        return self.read(workload_id) if planned is None else planned

    def result_owner(self, result_id: str, workload: Workload) -> str | None:
        """The workload of ``workload``'s application this batch records ``result_id`` for."""
        return self.results.get((workload.tenant_id, workload.application_id, result_id))

    def decide_each(
        self, items: Iterable[Item], decide: Callable[[Item], Step[T]]
    ) -> list[Step[T] | WorkloadError]:
        """Each item decided in order (``decide`` refusing it, or answering its step, which
        is planned so later items see it).
        """
        steps: list[Step[T] | WorkloadError] = []
        for item in items:
            try:
                step = decide(item)
            except WorkloadError as refusal:
                steps.append(refusal)
                continue
            self.plan(step)
            steps.append(step)
        return steps

    def plan(self, step: Step[Any]) -> None:
        """Keep ``step``'s change for the commit; later items see it."""
        if step.loaded is None:
            return
        workload = step.loaded.workload
        # What the next item on this workload reads: this change, still guarded by the
        # version first read. The batch commits one document a workload (its last item's),
        # so a writer that commits between the read and the batch wins over all of them.
        self.pending[workload.workload_id] = LoadedWorkload.of(workload, step.loaded.version)
        if workload.result is not None:
            key = (workload.tenant_id, workload.application_id, workload.result.result_id)
            self.results.setdefault(key, workload.workload_id)

    def commit(
        self,
        steps: Sequence[Step[T] | WorkloadError],
        notify: Notify,
        remember: Remember,
        commit_many: CommitMany | None = None,
    ) -> list[T | WorkloadError]:
        """Commit every step's change in one transaction (each committed workload handed to
        ``remember``) and answer each item in order: its answer, its refusal, or the
        conflict of a lost guard. ``commit_many``: how the plans are committed (the
        database's ``commit_many`` unless told; one that refuses a plan refuses its item).
        """
        last: dict[str, Step[T]] = {}  # by workload: the step whose document is committed
        for step in steps:
            if isinstance(step, Step) and step.loaded is not None:
                last[step.loaded.workload.workload_id] = step
        plans = [_plan(step) for step in last.values()]
        committing = self.db.commit_many if commit_many is None else commit_many
        outcomes = dict(zip(last, committing(plans), strict=True))
        for plan, (written, step) in zip(plans, last.items(), strict=True):
            assert step.loaded is not None
            if not isinstance(outcomes[written], WorkloadError):
                admitted = step.operation is Operation.ADMIT
                version = 1 if admitted else step.loaded.version + 1
                remember(plan, step.loaded.workload, version)
        answers: list[T | WorkloadError] = []
        for step in steps:
            if isinstance(step, WorkloadError):
                answers.append(step)
                continue
            key = step.loaded.workload.workload_id if step.loaded is not None else step.depends_on
            outcome = outcomes.get(key) if key is not None else None
            if isinstance(outcome, WorkloadError):  # a lost guard, or a refusal at commit
                answers.append(outcome)
                continue
            if step.loaded is not None and step.operation is not None:
                admitted = step.operation is Operation.ADMIT
                notify(step.operation, None if admitted else step.loaded, step.loaded.workload)
            answers.append(step.refusal if step.refusal is not None else step.answer)  # type: ignore[arg-type]
        return answers


def _plan(step: Step[Any]) -> PlannedCommit:
    """The guarded commit of a step's change: require-absent for an admission, else guarded
    by the version it was read at.
    """
    assert step.loaded is not None
    operation = None if step.operation is None else step.operation.value
    if step.operation is Operation.ADMIT:
        return planned_commit(step.loaded.workload, CREATED, None, operation)
    planned = planned_commit(step.loaded.workload, MUTATED, step.loaded.version, operation)
    return holding(planned, step.held, step.also)
