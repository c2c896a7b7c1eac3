"""Admission through the unit of work: decide each request (a new workload, or the replay
of one already admitted under the same key), commit the new ones, and converge on what
another writer committed when it admitted the same identity first.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from feltdb.auth.policy import covers, within_constraints, workload_uri
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import StorageConflict
from feltdb.work import inputs
from feltdb.work.admission import new_workload, replay, validate_admission
from feltdb.work.batches import CommitMany, Step
from feltdb.work.changes import Operation
from feltdb.work.concurrency_defaults import Defaults, with_default_limit
from feltdb.work.identities import workload_id_for
from feltdb.work.models import CreateWorkload
from feltdb.work.quota_charges import QUOTA_GROUPS, commit_admissions, subjects_of
from feltdb.work.rows import CREATED, LoadedWorkload, planned_commit, same_application
from feltdb.work.unit import ReadAhead, UnitOfWork

Admitted = tuple[Workload, bool]


def admit(unit: UnitOfWork, request: CreateWorkload) -> Admitted:
    """Admit one request: see ``WorkloadStore.admit``; new work of a subject with an
    admission quota is charged to it in its commit (:mod:`~feltdb.work.quota_charges`).
    """
    step = admission_step(unit, request, {})
    if step.loaded is None:
        return step.answer  # type: ignore[return-value]  # a replay
    workload = step.loaded.workload
    plan = planned_commit(workload, CREATED, None, Operation.ADMIT.value)
    keys = subjects_of(unit.db, workload)
    try:
        if keys and unit.group is not None:
            QUOTA_GROUPS.commit(unit.db, plan, workload, keys)
        elif keys:
            limited = {workload.workload_id: (workload, keys)}
            [outcome] = commit_admissions(unit.db, [plan], limited)
            if isinstance(outcome, WorkloadError):
                raise outcome
        else:
            unit.write(plan)
    except StorageConflict:
        return converge(unit, workload.workload_id, request)
    unit.remember(plan, workload, 1)
    unit.notify(Operation.ADMIT, None, workload)
    return workload, True


def admit_many(
    unit: UnitOfWork, requests: Sequence[CreateWorkload], *, whole: bool = False
) -> list[Admitted | WorkloadError]:
    """Admit each request, all in one transaction: see ``WorkloadStore.admit_many``; new
    work of subjects with admission quotas is charged to them in that transaction, each
    item refused on its own (``whole``: one refused by a quota refuses all, as a
    workflow's nodes are).
    """
    requests = inputs.batch(requests, "requests")
    batch = unit.batch(None)
    # Whether each identity was admitted already, asked of the store in one statement.
    ids = [workload_id_of(r) if isinstance(r, CreateWorkload) else None for r in requests]
    ahead = unit.read_ahead(ids)
    admitted: dict[str, Workload] = {}
    defaults: Defaults = {}
    steps: list[Step[Admitted] | WorkloadError] = []
    for request, known_id in zip(requests, ids, strict=True):
        try:
            step = admission_step(unit, request, admitted, ahead, known_id, defaults)
        except WorkloadError as refusal:
            steps.append(refusal)
            continue
        if step.loaded is not None:
            admitted[step.loaded.workload.workload_id] = step.loaded.workload
        steps.append(step)
    answers = unit.finish_many(batch, steps, _quota_commit(unit, admitted, whole))
    # A lost guard on an admission: another writer admitted that identity first, and
    # each item of it converges on what that writer committed, as admit would.
    for n, (decided, answer) in enumerate(zip(steps, answers, strict=True)):
        if isinstance(answer, StorageConflict) and isinstance(decided, Step):
            loaded = decided.loaded
            key = loaded.workload.workload_id if loaded is not None else decided.depends_on
            try:
                answers[n] = converge(unit, str(key), requests[n])
            except WorkloadError as refusal:
                answers[n] = refusal
    return answers


def _quota_commit(
    unit: UnitOfWork, admitted: dict[str, Workload], whole: bool
) -> CommitMany | None:
    """How a batch admitting ``admitted`` commits: charged to the quotas of its subjects
    that have one, or as any batch when none has.
    """
    limited: dict[str, tuple[Workload, Sequence[str]]] = {}
    for workload_id, workload in admitted.items():
        keys = subjects_of(unit.db, workload)
        if keys:
            limited[workload_id] = (workload, keys)
    if not limited:
        return None
    return partial(commit_admissions, unit.db, limited=limited, whole=whole)


def admission_step(
    unit: UnitOfWork,
    request: CreateWorkload,
    admitted: dict[str, Workload],
    ahead: ReadAhead | None = None,
    workload_id: str | None = None,
    defaults: Defaults | None = None,
) -> Step[Admitted]:
    """Decide an admission: the new workload to commit (with its definition's default
    concurrency limit, :func:`with_default_limit`; ``defaults``: those the batch read), or
    the replay of one already committed (or in ``admitted``, earlier in the same batch;
    ``ahead``: what the batch read of the store; ``workload_id``: the request's, when the
    batch made it already).
    """
    if not isinstance(request, CreateWorkload):
        request = CreateWorkload.parse(request)
    workload_id = authorized(request, workload_id)
    ensure_dependencies_visible(unit, request, admitted)
    earlier = admitted.get(workload_id)  # admitted earlier in the same batch
    if earlier is not None:
        return Step(answer=replay(earlier, request), depends_on=workload_id)
    # Another writer may have admitted this identity: ask the store, by key.
    existing = unit.read(workload_id, ahead)
    if existing is not None:
        return Step(answer=replay(existing.workload, request))
    read = {} if defaults is None else defaults
    workload = with_default_limit(unit.db, new_workload(request, workload_id), read)
    return Step(LoadedWorkload.of(workload, 0), Operation.ADMIT, (workload, True))


def authorized(request: CreateWorkload, workload_id: str | None = None) -> str:
    """The id of the workload ``request`` admits (``workload_id``, if already made), once
    the request is valid (:func:`~feltdb.work.admission.validate_admission`) and its
    snapshot covers that workload: every check of an admission that reads nothing.

    Raises:
        WorkloadError: those of ``validate_admission``; ``WORKLOAD_UNAUTHORIZED``.
    """
    validate_admission(request)
    if workload_id is None:
        workload_id = workload_id_of(request)
    # The snapshot must cover the work it authorizes, before anything is read.
    resource = workload_uri(request.application_id, workload_id)
    if not covers(request.authorization_snapshot.grant, resource):
        raise WorkloadError(
            ErrorCode.WORKLOAD_UNAUTHORIZED,
            f"the grant does not cover resource {resource!r}",
            {"missing": "resource"},
        )
    return workload_id


def workload_id_of(request: CreateWorkload) -> str:
    """The id of the workload ``request`` admits (its requester's key, in its application)."""
    return workload_id_for(
        request.tenant_id, request.application_id, request.requested_by, request.idempotency_key
    )


def converge(unit: UnitOfWork, workload_id: str, request: CreateWorkload) -> Admitted:
    """After losing an admission's require-absent guard: the replay of what the other
    writer committed.
    """
    committed = unit.read(workload_id)
    if committed is None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT, f"workload {workload_id} was admitted concurrently"
        )
    return replay(committed.workload, request)


def ensure_dependencies_visible(
    unit: UnitOfWork, request: CreateWorkload, admitted: dict[str, Workload]
) -> None:
    """Refuse a dependency on work the request's grant may not see: work that is missing,
    of another tenant or application, outside the grant's resource scopes, or outside
    its constraints. Work in ``admitted`` (earlier in the same batch) counts as there.

    The refusal is the same in every case, so no requester learns whether work it may
    not see exists, nor (through when its own work becomes claimable) its state.
    """
    grant = request.authorization_snapshot.grant
    for index, dependency in enumerate(request.dependencies):
        planned = admitted.get(dependency.workload_id)
        if planned is not None:
            document: dict[str, Any] | None = {
                "tenant_id": planned.tenant_id,
                "application_id": planned.application_id,
                "environment": planned.environment,
                "definition_id": planned.definition_id,
            }
        else:
            row = unit.db.get_row(DURABLE_WORK_COLLECTION, dependency.workload_id)
            document = row.document if row is not None else None
        if (
            document is None
            or not same_application(document, request)
            or not covers(grant, workload_uri(request.application_id, dependency.workload_id))
            or not within_constraints(
                grant, str(document.get("environment")), str(document.get("definition_id"))
            )
        ):
            raise inputs.invalid(
                f"dependencies.{index}.workload_id",
                f"no workload {dependency.workload_id} in this tenant and application",
            )
