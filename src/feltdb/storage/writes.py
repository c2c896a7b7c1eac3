"""The write path of :class:`~feltdb.storage.engine.SQLEngine`: a commit validated and
serialized before any lock is taken, then written inside a write transaction, alone or as
one plan of a batch.

Each plan is written in one order on every backend: its guarded rows first, in the
preconditions' order (each by the one statement that is its guard, so the conflict reported
is the first failing precondition's), then the guards of rows it only read (each read, held
against writers, never waited for), then its other rows, then its log entry. The row
statements and the log entry compute the plan's revision themselves (SQLite: the greatest
logged revision + 1, read before the entry is logged; PostgreSQL: the transaction's id
times 1024 plus ``position``, the plan's place among the transaction's committed plans).

So a plan that loses its first guard has written nothing: in a batch, only a plan with
two guards or more, which may lose the second after writing the first, is written inside
a ``SAVEPOINT``, rolled back to when a guard is lost. (A savepoint for every plan costs a
subtransaction each on PostgreSQL, two more round trips per plan, and past 64 of them in
one transaction every snapshot of the cluster overflows its subtransaction cache.)

Where the dialect has :attr:`~feltdb.storage.dialect.Dialect.array_writes` (PostgreSQL),
:func:`write_batch` may write a batch by arrays instead: a batch of plans of one guarded row
each (every hot-path batch: admissions, claims, completions, heartbeats) in a few statements
whatever its size, each plan decided, written at its position and logged exactly as it
would be plan by plan: :mod:`feltdb.storage.array_writes` says when, and how.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

from feltdb.errors import WorkloadError
from feltdb.limits import MAX_PLANS_PER_BATCH
from feltdb.storage import array_writes
from feltdb.storage.audit_chain import row_hash
from feltdb.storage.base import (
    Commit,
    Mutation,
    PlannedCommit,
    Precondition,
    StorageConflict,
)
from feltdb.storage.dialect import Dialect, Session
from feltdb.storage.encoding import (
    audit_json,
    committed,
    guards,
    invalid,
    lost_guard,
    new_transaction_id,
    prepare_writes,
)
from feltdb.storage.selecting import SetAside

__all__ = [
    "PreparedCommit",
    "prepare",
    "prepare_batch",
    "release_params",
    "write_batch",
    "write_plan",
    "write_set_aside",
    "write_undoable",
]

Queries = Mapping[str, LiteralString]


@dataclass(frozen=True, slots=True)
class PreparedCommit:
    """A validated, serialized commit, ready to apply inside a write transaction."""

    transaction_id: str
    mutations: list[Mutation]
    writes: list[dict[str, Any]]
    """Parameters of each mutation, in mutation order (``document`` ``None``: delete)."""
    guards: list[tuple[Precondition, int]]
    """Each guard, in the given order, and the position in ``writes`` of the row it guards."""
    unwritten: list[Precondition]
    """The guards of rows the commit read and does not write, checked before any write."""
    log: dict[str, Any]
    """Parameters of ``insert_transaction``, but ``committed_at``, ``position`` and
    ``row_hashes``.
    """
    stored_list: Callable[[list[str]], Any]
    """The dialect's :meth:`~feltdb.storage.dialect.Dialect.stored_list`."""

    def row_hashes(self, versions: Sequence[int | None]) -> list[str]:
        """Each written row's :func:`~feltdb.storage.audit_chain.row_hash` at its new
        version, in mutation order (``""`` for a delete), as the log keeps them.
        """
        return [
            "" if write["document"] is None or version is None
            else row_hash(f"{write['collection']}/{write['key']}", version, write["document"])
            for write, version in zip(self.writes, versions, strict=True)
        ]  # fmt: skip

    def commit(self, revision: int, versions: list[int | None]) -> Commit:
        """What the commit answers once written at ``revision``, with each write's version."""
        texts = [write["document"] for write in self.writes]
        return committed(self.transaction_id, self.mutations, revision, versions, texts)


def prepare(dialect: Dialect, plan: PlannedCommit) -> PreparedCommit:
    """Validate and serialize a commit, and pair each guard with its write.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``, as :meth:`Database.commit` documents.
    """
    writes, written = prepare_writes(plan.operation_id, plan.mutations, plan.audit)
    guarded, unwritten = guards(plan.preconditions, writes, written)
    transaction_id = new_transaction_id(plan.operation_id)
    audit = plan.audit
    log = {
        "transaction_id": transaction_id,
        "operation_ids": dialect.stored_list([plan.operation_id]),
        "keys": dialect.stored_list([f"{m.collection}/{m.key}" for m in plan.mutations]),
        "audit": None if audit is None else audit_json(audit),
    }
    return PreparedCommit(
        transaction_id, list(plan.mutations), writes, guarded, unwritten, log,
        dialect.stored_list,
    )  # fmt: skip


def prepare_batch(dialect: Dialect, plans: Sequence[PlannedCommit]) -> list[PreparedCommit]:
    """Every plan of a batch prepared, or the first refusal: the whole batch is refused.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for more than :data:`MAX_PLANS_PER_BATCH`
            plans, or the first invalid plan's refusal, its place in the message and as
            ``details["plan"]``.
    """
    if len(plans) > MAX_PLANS_PER_BATCH:
        raise invalid(f"a batch commits at most {MAX_PLANS_PER_BATCH} plans, not {len(plans)}")
    prepared: list[PreparedCommit] = []
    for place, plan in enumerate(plans):
        try:
            prepared.append(prepare(dialect, plan))
        except WorkloadError as error:
            details = {**(error.details or {}), "plan": place}
            message = f"plan {place} of the batch: {error.message}"
            raise WorkloadError(error.code, message, details) from error
    return prepared


def write_plan(
    session: Session, queries: Queries, prepared: PreparedCommit, position: int = 0
) -> Commit:
    """Inside the write transaction: write one plan's rows, guarded rows first, then log it
    (see the module's docstring); what it committed.

    Raises:
        StorageConflict: a guard was lost; the rows written before it are not undone here.
    """
    versions: list[int | None] = [None] * len(prepared.writes)
    for precondition, place in prepared.guards:
        write = {**prepared.writes[place], "position": position}
        versions[place] = _guarded_write(session, queries, precondition, write)
    # After the plan's own guards, which may wait for a writer of their rows: one that
    # waited while holding a row it only read could close a cycle of waits with that
    # row's writer. These never wait (see _held_unchanged).
    for precondition in prepared.unwritten:
        _held_unchanged(session, queries, precondition)
    guarded = {place for _, place in prepared.guards}
    for place, params in enumerate(prepared.writes):
        if place in guarded:
            continue
        if params["document"] is None:
            session.execute(queries["delete_row"], params)
        else:
            write = {**params, "position": position}
            versions[place] = session.execute(queries["upsert_row"], write).fetchall()[0][0]
    for mutation in prepared.mutations:
        if mutation.releases and not mutation.deletes:
            session.execute(queries["release_waiting"], release_params(mutation))
    # Stamped inside the transaction, so committed_at follows the order of commits (as far
    # as the wall clock does); a dialect may take the instant from its server.
    hashes = prepared.stored_list(prepared.row_hashes(versions))
    stamped = {
        **prepared.log,
        "committed_at": time.time(),
        "position": position,
        "row_hashes": hashes,
    }
    revision: int = session.execute(queries["insert_transaction"], stamped).fetchall()[0][0]
    return prepared.commit(revision, versions)


def write_batch(
    session: Session, queries: Queries, batch: Sequence[PreparedCommit], *, arrays: bool = False
) -> list[Commit | StorageConflict]:
    """Inside the write transaction: write each plan in order, each committed plan at the
    next position; a plan that loses a guard leaves nothing behind and answers its
    conflict. With ``arrays`` (the dialect's
    :attr:`~feltdb.storage.dialect.Dialect.array_writes`), a batch that
    :func:`~feltdb.storage.array_writes.qualifies` is written by arrays, to the same effect.
    """
    if arrays and array_writes.qualifies(batch):
        written = array_writes.write_arrays(session, queries, batch)
        _release_arrays(session, queries, batch, written)
        return written
    answers: list[Commit | StorageConflict] = []
    position = 0
    for prepared in batch:
        answer = write_undoable(session, queries, prepared, position)
        position += not isinstance(answer, StorageConflict)
        answers.append(answer)
    return answers


def write_undoable(
    session: Session, queries: Queries, prepared: PreparedCommit, position: int
) -> Commit | StorageConflict:
    """Inside the write transaction: :func:`write_plan`, answering a lost guard rather than
    raising it, with nothing of the plan left behind.
    """
    # A plan's one guard, if it has only one, is its first statement: losing it writes
    # nothing. A plan of more guards (of rows it writes, or only read, which are checked
    # after its writes) may lose one after writing: it has a savepoint.
    undoable = len(prepared.guards) + len(prepared.unwritten) > 1
    if undoable:
        session.execute(queries["savepoint"], {})
    try:
        answer: Commit | StorageConflict = write_plan(session, queries, prepared, position)
    except StorageConflict as conflict:
        if undoable:
            # psycopg forgets its prepared statements after this, as after any
            # ROLLBACK: the price of the rare plan that loses its second guard.
            session.execute(queries["rollback_to_savepoint"], {})
        answer = conflict
    if undoable:
        session.execute(queries["release_savepoint"], {})
    return answer


def release_params(mutation: Mutation) -> dict[str, Any]:
    """The parameters of ``release_waiting`` for a written ``mutation`` that releases."""
    index = mutation.index
    return {
        "collection": mutation.collection,
        "tenant_id": index.tenant_id,
        "application_id": index.application_id,
        "key": mutation.key,
    }


def write_set_aside(
    session: Session, queries: Queries, chosen: Sequence[PlannedCommit | SetAside]
) -> list[PlannedCommit]:
    """Inside the selecting transaction: set aside each row ``chosen`` sets aside; the
    plans ``chosen`` holds beside them, to write.
    """
    plans: list[PlannedCommit] = []
    for item in chosen:
        if isinstance(item, SetAside):
            params = {
                "collection": item.collection,
                "key": item.key,
                "version": item.version,
                "waits_on": item.waits_on,
                "waits_for": item.waits_for,
                "waits_on_version": item.waits_on_version,
            }
            session.execute(queries["set_aside"], params)
        else:
            plans.append(item)
    return plans


def _release_arrays(
    session: Session,
    queries: Queries,
    batch: Sequence[PreparedCommit],
    written: Sequence[Commit | StorageConflict],
) -> None:
    """``release_waiting`` of every releasing row the committed plans wrote, in one
    statement (the array path's).
    """
    released = [
        release_params(mutation)
        for prepared, answer in zip(batch, written, strict=True)
        if not isinstance(answer, StorageConflict)
        for mutation in prepared.mutations
        if mutation.releases and not mutation.deletes
    ]
    if released:
        columns = ("collection", "tenant_id", "application_id", "key")
        arrays = {f"{name}s": [row[name] for row in released] for name in columns}
        session.execute(queries["release_waiting_arrays"], arrays)


def _guarded_write(
    session: Session, queries: Queries, precondition: Precondition, write: dict[str, Any]
) -> int | None:
    """Write one guarded row by the statement that is its guard; its new version
    (``None``: deleted).

    The statement changes one row or none, and the version it wrote follows from its
    guard (1 for an insert, the expected version + 1 for an update), so it returns
    nothing: a ``RETURNING`` clause cost SQLite 3.40 about 15 µs an update and 6 µs an
    insert (measured), a third of what the statement cost without it.

    Raises:
        StorageConflict: the statement wrote nothing: the guard was lost.
    """
    # guards() passes only a guard that requires no row or a version.
    expected = precondition.expected_version
    version: int | None
    if write["document"] is None:
        name, version = "delete_row_if_version", None
    elif precondition.require_absent:
        name, version = "insert_row_if_absent", 1
    else:
        assert expected is not None
        name, version = "update_row_if_version", expected + 1
    write["expected_version"] = expected
    if session.execute(queries[name], write).rowcount != 1:
        raise _lost(session, queries, precondition)
    return version


def _held_unchanged(session: Session, queries: Queries, precondition: Precondition) -> None:
    """Check the guard of a row the commit does not write, holding the row against other
    writers until the transaction ends (PostgreSQL's ``FOR SHARE``; SQLite's write
    transaction holds off every writer already). A row another transaction is writing at
    that moment is not waited for: the guard is lost, as it would be once that write
    commits.

    Raises:
        StorageConflict: the row is not as the guard requires, or is being written.
    """
    key = {"collection": precondition.collection, "key": precondition.key}
    wanted = None if precondition.require_absent else precondition.expected_version
    held = session.execute(queries["row_version_held"], key).fetchall()
    if held:
        if held[0][0] != wanted:
            raise lost_guard(precondition, held[0][0])
        return
    # No row, or one skipped while another transaction writes it: the committed row
    # says which.
    found = session.execute(queries["row_version"], key).fetchall()
    version = found[0][0] if found else None
    if version is None and wanted is None:
        return
    if version is not None and version == wanted:
        raise StorageConflict(
            f"{precondition.collection}/{precondition.key}: another transaction is writing it",
            {**key, "expected_version": wanted, "found_version": version},
        )
    raise lost_guard(precondition, version)


def _lost(session: Session, queries: Queries, precondition: Precondition) -> StorageConflict:
    """The conflict of a guard its write lost, with the version that beat it."""
    found = session.execute(
        queries["row_version"], {"collection": precondition.collection, "key": precondition.key}
    ).fetchall()
    return lost_guard(precondition, found[0][0] if found else None)
