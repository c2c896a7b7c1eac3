""":class:`~feltdb.storage.held.HeldCommits` over a dialect's statements, for
:class:`~feltdb.storage.engine.SQLEngine`: the held rows read with ``get_row_held``, the
counts of :mod:`feltdb.storage.counts` run in the same transaction, the plans written as
:func:`~feltdb.storage.writes.write_batch` writes them (by arrays on PostgreSQL), the last
with the held rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final, LiteralString

from feltdb.errors import WorkloadError
from feltdb.storage.base import (
    Commit,
    Mutation,
    PlannedCommit,
    Precondition,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.counts import count_params, count_statement
from feltdb.storage.dialect import Dialect, Session
from feltdb.storage.encoding import invalid, stored_row
from feltdb.storage.held import Counter, Decision
from feltdb.storage.writes import prepare, write_batch, write_plan, write_undoable

__all__ = ["HeldQueries"]


class HeldQueries:
    """:class:`~feltdb.storage.held.HeldCommits` over a dialect's statements
    ``get_row_held`` and the counts' (a base of ``SQLEngine``).
    """

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]

    def commit_held(
        self,
        collection: str,
        keys: Sequence[str],
        counted: str,
        decide: Callable[[Mapping[str, StoredRow | None], Counter], Decision],
    ) -> list[Commit | WorkloadError]:
        """See :meth:`~feltdb.storage.held.HeldCommits.commit_held`."""
        self._dialect.ensure_open()
        queries, dialect = self._queries, self._dialect

        def work(session: Session) -> list[Commit | WorkloadError]:
            held: dict[str, StoredRow | None] = {}
            for key in sorted(set(keys)):  # one order: two holders never wait on each other
                found = session.execute(
                    queries["get_row_held"], {"collection": collection, "key": key}
                ).fetchall()
                held[key] = stored_row(*found[0]) if found else None

            def count(
                tenant_id: str,
                states: Sequence[str],
                limit: int,
                grant_id: str | None,
                application: str | None,
            ) -> int:
                if limit <= 0 or not states:
                    return 0
                params = count_params(
                    dialect, counted, tenant_id, states, limit, grant_id, application
                )
                found = session.execute(queries[count_statement(grant_id)], params).fetchall()
                return int(found[0][0]) if found else 0

            decision = decide(held, count)
            return _write(session, queries, dialect, held, decision)

        return dialect.transact("commit", work)


def _write(
    session: Session,
    queries: Mapping[str, LiteralString],
    dialect: Dialect,
    held: Mapping[str, StoredRow | None],
    decision: Decision,
) -> list[Commit | WorkloadError]:
    """Inside the transaction: the plans written in order, as ``commit_many`` writes them,
    the last with the held rows' writes (or, if it loses its own guard, they in a plan of
    their own after it), each refusal answered as it is.
    """
    answers: list[Commit | WorkloadError] = []
    plans: list[tuple[int, PlannedCommit]] = []
    for place, item in enumerate(decision.items):
        answers.append(item if isinstance(item, WorkloadError) else _UNWRITTEN)
        if not isinstance(item, WorkloadError):
            plans.append((place, item))
    if not plans:
        return answers
    *firsts, (last, plan) = plans
    batch = [prepare(dialect, first) for _, first in firsts]
    written = write_batch(session, queries, batch, arrays=dialect.array_writes) if batch else []
    for (place, _), answer in zip(firsts, written, strict=True):
        answers[place] = answer
    position = sum(not isinstance(answer, StorageConflict) for answer in written)
    carried, guards = _held_writes(held, decision.held_writes)
    carrier = replace(
        plan,
        mutations=[*plan.mutations, *carried],
        preconditions=[*plan.preconditions, *guards],
    )
    answers[last] = write_undoable(session, queries, prepare(dialect, carrier), position)
    if isinstance(answers[last], StorageConflict) and carried and position:
        # The last plan lost its own guard, and the held rows with it: they are written
        # alone, for the plans before it committed on them (held, they cannot lose).
        alone = PlannedCommit(plan.operation_id, carried, guards, decision.held_audit)
        write_plan(session, queries, prepare(dialect, alone), position)
    return answers


_UNWRITTEN: Final = WorkloadError("WORKLOAD_STORAGE_FAILURE", "not written")
"""A plan's answer until it is written (every plan's is replaced)."""


def _held_writes(
    held: Mapping[str, StoredRow | None], mutations: Sequence[Mutation]
) -> tuple[list[Mutation], list[Precondition]]:
    """The held rows' writes, each guarded by the version it was read at.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a write of a row not held.
    """
    guards: list[Precondition] = []
    for mutation in mutations:
        if mutation.key not in held:
            raise invalid(f"{mutation.collection}/{mutation.key}: a row the commit does not hold")
        row = held[mutation.key]
        guards.append(
            Precondition(mutation.collection, mutation.key, require_absent=True)
            if row is None
            else Precondition(mutation.collection, mutation.key, expected_version=row.version)
        )
    return list(mutations), guards
