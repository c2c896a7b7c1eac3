""":class:`~feltdb.storage.held.HeldCommits` over a dialect's statements, for
:class:`~feltdb.storage.engine.SQLEngine`: the held rows read with ``get_row_held``, the
counts of :mod:`feltdb.storage.counts` run in the same transaction, the plans written as
:func:`~feltdb.storage.writes.write_batch` writes them (plan by plan).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import LiteralString

from feltdb.errors import WorkloadError
from feltdb.storage.base import Commit, Mutation, Precondition, StorageConflict, StoredRow
from feltdb.storage.counts import count_params, count_statement
from feltdb.storage.dialect import Dialect, Session
from feltdb.storage.encoding import invalid, stored_row
from feltdb.storage.held import Counter, Decision
from feltdb.storage.writes import prepare, write_undoable

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
    """Inside the transaction: each plan written in order (the held rows' writes with the
    first that commits), each refusal answered as it is.
    """
    carried: list[Mutation] = []
    guards: list[Precondition] = []
    for mutation in decision.held_writes:
        if mutation.key not in held:
            raise invalid(f"{mutation.collection}/{mutation.key}: a row the commit does not hold")
        row = held[mutation.key]
        carried.append(mutation)
        guards.append(
            Precondition(mutation.collection, mutation.key, require_absent=True)
            if row is None
            else Precondition(mutation.collection, mutation.key, expected_version=row.version)
        )
    answers: list[Commit | WorkloadError] = []
    position = 0
    for item in decision.items:
        if isinstance(item, WorkloadError):
            answers.append(item)
            continue
        plan = item
        if carried:
            plan = replace(
                item,
                mutations=[*item.mutations, *carried],
                preconditions=[*item.preconditions, *guards],
            )
        answer = write_undoable(session, queries, prepare(dialect, plan), position)
        if not isinstance(answer, StorageConflict):
            position += 1
            carried, guards = [], []  # written: the held rows ride on no other plan
        answers.append(answer)
    return answers
