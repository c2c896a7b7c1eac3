"""Importing a pre-canonical JSON store file, verified against what it claims.

The file is one JSON object: ``"workloads"`` maps each workload id to its record (a
:class:`~feltdb.work.models.Workload` as JSON), and three derived maps are the evidence
the import is checked against: ``"idempotency"`` (``"tenant:application:key"`` to workload
id), ``"result_ids"`` (result id to workload id) and ``"event_sequence"`` (the highest event
sequence). The derived maps are verification evidence, not authorities: they must match
what the canonical work derives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Database
from feltdb.work.audit import MIGRATION
from feltdb.work.identities import legacy_idempotency_scope
from feltdb.work.rows import planned_commit, workload_of


def migrate_legacy_file(
    db: Database,
    path: Path,
    progress: Callable[[int, int], None] | None = None,
    imported: Callable[[str, bool], None] | None = None,
) -> None:
    """Import the legacy file at ``path`` into ``db`` and verify it (see the module).

    Every record is checked before anything is written. Idempotent: a workload already
    imported identically is skipped. ``progress`` is told ``(done, total)`` after each
    workload, ``imported`` ``(workload_id, True)`` for one written and
    ``(workload_id, False)`` for one skipped.

    Raises:
        WorkloadError: ``WORKLOAD_MIGRATION_CONFLICT`` when records are not workload
            records (one line each: index, id, field, why), a key does not match its
            workload, canonical work differs from the file, or the derived maps do not
            match; ``WORKLOAD_STORAGE_FAILURE`` when the file cannot be read.
    """
    legacy = _read_legacy_file(path)
    workloads: dict[str, Any] = legacy.get("workloads") or {}
    parsed = _legacy_records(workloads)
    for done, (key, workload) in enumerate(parsed.items(), start=1):
        written = _import_record(db, key, workload)
        if imported is not None:
            imported(key, written)
        if progress is not None:
            progress(done, len(workloads))
    canonical = [workload_of(row) for row in db.list_rows(DURABLE_WORK_COLLECTION)]
    if _derived_evidence(canonical) != (
        legacy.get("idempotency") or {},
        legacy.get("result_ids") or {},
        legacy.get("event_sequence") or 0,
    ):
        raise WorkloadError(
            ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
            "legacy derived indexes do not match canonical work aggregates",
        )


def _import_record(db: Database, key: str, workload: Workload) -> bool:
    """Write one legacy record (``True``), or find it imported already (``False``)."""
    if key != workload.workload_id:
        raise WorkloadError(
            ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
            f"legacy key {key} does not match workload identity {workload.workload_id}",
        )
    existing = db.get_row(DURABLE_WORK_COLLECTION, key)
    if existing is not None:
        if workload_of(existing).to_json() != workload.to_json():
            raise WorkloadError(
                ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
                f"canonical workload {key} differs from legacy source",
            )
        return False
    plan = planned_commit(workload, MIGRATION, None, "migrate")
    db.commit(plan.operation_id, plan.mutations, plan.preconditions, plan.audit)
    return True


def _derived_evidence(
    canonical: Iterable[Workload],
) -> tuple[dict[str, str], dict[str, str], int]:
    """What the canonical work derives: the idempotency map, the result-id map and the
    highest event sequence, as a legacy file states them.
    """
    work = list(canonical)
    idempotency = {
        legacy_idempotency_scope(
            workload.tenant_id, workload.application_id, workload.idempotency_key
        ): workload.workload_id
        for workload in work
    }
    results = {
        workload.result.result_id: workload.workload_id
        for workload in work
        if workload.result is not None
    }
    sequence = max((e.sequence for workload in work for e in workload.execution_history), default=0)
    return idempotency, results, sequence


def _legacy_records(workloads: dict[str, Any]) -> dict[str, Workload]:
    """Every legacy record as a :class:`Workload`, or one refusal naming each bad record on
    a line of its own: its index, its id, and the first field wrong with it and why.
    """
    parsed: dict[str, Workload] = {}
    problems: list[str] = []
    for index, (key, document) in enumerate(workloads.items()):
        try:
            parsed[key] = Workload.parse(document)
        except WorkloadError as error:
            problems.append(f"record {index} ({key}): {error.message}")
    if problems:
        raise WorkloadError(
            ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
            f"{len(problems)} legacy records are not workload records:\n" + "\n".join(problems),
            {"records": len(problems)},
        )
    return parsed


def _read_legacy_file(path: Path) -> dict[str, Any]:
    try:
        legacy = json.loads(path.read_bytes())
    except OSError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE, f"cannot read legacy file {path}: {error}"
        ) from error
    except ValueError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE, f"legacy file {path} is not JSON: {error}"
        ) from error
    if not isinstance(legacy, dict):
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE, f"legacy file {path} is not a JSON object"
        )
    return legacy
