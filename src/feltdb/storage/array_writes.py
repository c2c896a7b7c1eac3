"""The array path of a batch (PostgreSQL's): plans of one guarded row each, written in a
few statements over arrays (``unnest``) instead of two round trips per plan.

A batch takes it when its dialect has :attr:`~feltdb.storage.dialect.Dialect.array_writes`
and it :func:`qualifies`: at least :data:`MIN_PLANS` plans, each writing (not deleting)
exactly one row, guarded by one precondition on that row (``require_absent``: an insert,
``expected_version``: an update), no row twice in the batch, and every value one that
PostgreSQL stores (a value it refuses is refused by the per-plan path, which sends even a
losing plan's values, as it is today).

:func:`write_arrays` then, inside the write transaction:

1. locks and reads every existing row of the batch (``lock_batch_rows``, ``FOR UPDATE``,
   in key order): under READ COMMITTED a row written concurrently is waited for and read
   as committed, a row deleted concurrently is absent;
2. decides each plan in order as its guarded write would: an update wins if its row is at
   exactly the expected version, an insert if its row is absent; a lost plan answers
   :func:`~feltdb.storage.encoding.lost_guard` with the version read, and the winners take
   the positions 0, 1, 2… in the batch's order (the plans are of distinct rows, so none
   decides another's fate);
3. inserts the winning inserts, then updates the winning updates, one statement each
   (``insert_batch_rows_if_absent``, ``update_batch_rows_if_version``), each row at its
   plan's position, with the columns ``insert_row_if_absent`` and ``update_row_if_version``
   write;
4. logs the winners in one statement (``insert_batch_transactions``), each entry as
   ``insert_transaction`` would have logged it.

An absent row cannot be locked: another transaction may insert it between 1 and 3, and the
insert (which waits for that transaction, as ``insert_row_if_absent`` does) then writes
nothing for it. That plan has lost as it would have plan by plan, and answers so with the
version read after its write (``row_version``, as the per-plan path reads it); the winners
after it move up a place, the rows already written at the old place are renumbered
(``renumber_batch_rows``), and only then is anything logged. (An update cannot lose so:
its row is locked; it is handled alike all the same.) So no prediction is ever undone by a
rollback: a redo plan by plan would lock rows in the batch's order, and deadlock with the
array path's batches, which lock them in key order (measured: it failed three retries in a
row under ``test_array_writes``'s concurrent batches).

Each array is sent as one parameter, the text of a PostgreSQL array literal
(:func:`text_array`, :func:`bigint_array`) cast by the statement (``::text[]``,
``::bigint[]``): psycopg's adaptation of a Python list costs about 4 µs an element, measured
(6 ms for the 14 arrays of an insert of 100 rows, more than the round trips it saves), the
literal under 1 µs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, LiteralString

from feltdb.storage.base import Commit, Precondition, StorageConflict
from feltdb.storage.dialect import Session
from feltdb.storage.encoding import lost_guard
from feltdb.storage.index_columns import INTEGER_COLUMNS, TEXT_COLUMNS

if TYPE_CHECKING:
    from feltdb.storage.writes import PreparedCommit

__all__ = ["MIN_PLANS", "bigint_array", "qualifies", "text_array", "write_arrays"]

Queries = Mapping[str, LiteralString]
Address = tuple[str, str]

MIN_PLANS: Final = 5
"""The fewest plans a batch writes by arrays. Measured (``bench/bench_commit_many.py
--arrays``, commits per second, arrays against plan by plan, inserts / updates): 2 plans
809 / 727 against 971 / 1093, 3 plans 1343 / 1127 against 1095 / 1240, 4 plans 1393 / 1244
against 1182 / 1324, 5 plans 1689 / 1419 against 1283 / 1328, 10 plans 2502 / 2201 against
1390 / 1473. A statement over arrays costs more than a single-row one, and below about 10
elements PostgreSQL plans it anew at every run (its custom plan, which knows the arrays'
lengths, looks cheaper than the generic one), so fewer round trips pay only from 5 plans.
"""

_TEXTS: Final = ("collection", "key", "document", *TEXT_COLUMNS)
_INTEGERS: Final = INTEGER_COLUMNS
_BIGINT: Final = range(-(2**63), 2**63)


def text_array(values: Sequence[str | None]) -> str:
    """The text of a ``text[]`` literal of ``values`` (``None``: ``NULL``): each element
    double-quoted, its backslashes and double quotes escaped by a backslash.
    """
    quoted = (
        "NULL" if value is None else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for value in values
    )
    return "{" + ",".join(quoted) + "}"


def bigint_array(values: Sequence[int | None]) -> str:
    """The text of a ``bigint[]`` literal of ``values`` (``None``: ``NULL``)."""
    return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"


def _arrays(
    rows: Sequence[Mapping[str, Any]], texts: Sequence[str], integers: Sequence[str]
) -> dict[str, str]:
    """The parameters of a statement over arrays: for each column, the array literal of
    its values in ``rows``.
    """
    params = {name: text_array([row[name] for row in rows]) for name in texts}
    params.update((name, bigint_array([row[name] for row in rows])) for name in integers)
    return params


def _storable(value: Any, text: bool) -> bool:
    """Whether PostgreSQL stores ``value`` as it is, a text (no NUL, valid UTF-8) or a
    64-bit integer, or ``None``; a bool, a float or a string of another kind is not.
    """
    if value is None:
        return True
    if text:
        if type(value) is not str or "\x00" in value:
            return False
        if value.isascii():
            return True
        try:
            value.encode()
        except UnicodeEncodeError:
            return False
        return True
    return type(value) is int and value in _BIGINT


def qualifies(batch: Sequence[PreparedCommit]) -> bool:
    """Whether the array path writes ``batch`` exactly as the per-plan path would (see the
    module's docstring); otherwise it is written plan by plan.
    """
    if len(batch) < MIN_PLANS:
        return False
    seen: set[Address] = set()
    for prepared in batch:
        if len(prepared.writes) != 1 or len(prepared.guards) != 1 or prepared.unwritten:
            return False
        write = prepared.writes[0]
        address = (write["collection"], write["key"])
        if write["document"] is None or address in seen:
            return False
        seen.add(address)
        expected = prepared.guards[0][0].expected_version
        if not (
            _storable(expected, False)
            and all(_storable(write[name], True) for name in _TEXTS)
            and all(_storable(write[name], False) for name in _INTEGERS)
        ):
            return False
    return True


def _address(prepared: PreparedCommit) -> Address:
    write = prepared.writes[0]
    return write["collection"], write["key"]


def _guard(prepared: PreparedCommit) -> Precondition:
    return prepared.guards[0][0]


def write_arrays(
    session: Session, queries: Queries, batch: Sequence[PreparedCommit]
) -> list[Commit | StorageConflict]:
    """Inside the write transaction: write a batch that :func:`qualifies` as the per-plan
    path would (see the module's docstring); answers per plan, in order.
    """
    addresses = [_address(prepared) for prepared in batch]
    params = {
        "collection": text_array([c for c, _ in addresses]),
        "key": text_array([k for _, k in addresses]),
    }
    locked = session.execute(queries["lock_batch_rows"], params).fetchall()
    found: dict[Address, int] = {(c, k): v for c, k, v in locked}
    answers: dict[int, Commit | StorageConflict] = {}
    decided: list[int] = []  # the places in the batch of the plans decided to win
    for place, (prepared, address) in enumerate(zip(batch, addresses, strict=True)):
        guard, current = _guard(prepared), found.get(address)
        if current is None if guard.require_absent else current == guard.expected_version:
            decided.append(place)
        else:
            answers[place] = lost_guard(guard, current)
    if decided:
        versions = _write_rows(session, queries, [batch[place] for place in decided])
        winners = [place for place in decided if addresses[place] in versions]
        for place in decided:
            if addresses[place] not in versions:
                answers[place] = _lost(session, queries, _guard(batch[place]))
        if len(winners) < len(decided):
            _renumber(session, queries, addresses, decided, winners)
        won = [batch[place] for place in winners]
        written = [versions[addresses[place]] for place in winners]
        logged = _log(session, queries, won, written) if winners else {}
        for place in winners:
            prepared = batch[place]
            revision = logged[prepared.transaction_id]
            answers[place] = prepared.commit(revision, [versions[addresses[place]]])
    return [answers[place] for place in range(len(batch))]


def _write_rows(
    session: Session, queries: Queries, decided: Sequence[PreparedCommit]
) -> dict[Address, int]:
    """Insert and update the rows of the plans decided to win, each at its place among
    them; the new version of each row written (a row not written lost its guard).
    """
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for position, prepared in enumerate(decided):
        guard = _guard(prepared)
        write = {**prepared.writes[0], "position": position}
        if guard.require_absent:
            inserts.append(write)
        else:
            updates.append({**write, "expected_version": guard.expected_version})
    versions: dict[Address, int] = {}
    for name, writes, extra in (
        ("insert_batch_rows_if_absent", inserts, ()),
        ("update_batch_rows_if_version", updates, ("expected_version",)),
    ):
        if writes:
            params = _arrays(writes, _TEXTS, (*_INTEGERS, "position", *extra))
            written = session.execute(queries[name], params).fetchall()
            versions.update(((c, k), int(v)) for c, k, v in written)
    return versions


def _lost(session: Session, queries: Queries, guard: Precondition) -> StorageConflict:
    """The conflict of a guard its write lost, with the version that beat it, read after
    the write (as :mod:`feltdb.storage.writes` reads it).
    """
    params = {"collection": guard.collection, "key": guard.key}
    found = session.execute(queries["row_version"], params).fetchall()
    return lost_guard(guard, found[0][0] if found else None)


def _renumber(
    session: Session,
    queries: Queries,
    addresses: Sequence[Address],
    decided: Sequence[int],
    winners: Sequence[int],
) -> None:
    """Move each winner's row (``addresses`` by place in the batch) from its place among
    the plans ``decided`` to win, where it was written, to its place among the ``winners``
    (the same until the first plan decided to win that lost).
    """
    written_at = {place: position for position, place in enumerate(decided)}
    moved = [
        (addresses[place], position)
        for position, place in enumerate(winners)
        if written_at[place] != position
    ]
    if not moved:  # only the last plans decided to win lost
        return
    params = {
        "collection": text_array([c for (c, _), _ in moved]),
        "key": text_array([k for (_, k), _ in moved]),
        "position": bigint_array([position for _, position in moved]),
    }
    session.execute(queries["renumber_batch_rows"], params)


def _log(
    session: Session, queries: Queries, winners: Sequence[PreparedCommit], versions: list[int]
) -> dict[str, int]:
    """Log the winners (``versions``: each one's row's new version), each at its place
    among them; each one's revision, by transaction id.
    """
    params = {
        "position": bigint_array(range(len(winners))),
        "transaction_id": text_array([prepared.transaction_id for prepared in winners]),
        # PostgreSQL's stored lists are the lists themselves, of one element each here.
        "operation_id": text_array([prepared.log["operation_ids"][0] for prepared in winners]),
        "written_key": text_array([prepared.log["keys"][0] for prepared in winners]),
        "audit": text_array([prepared.log["audit"] for prepared in winners]),
        "row_hash": text_array(
            [p.row_hashes([v])[0] for p, v in zip(winners, versions, strict=True)]
        ),
    }
    logged = session.execute(queries["insert_batch_transactions"], params).fetchall()
    return {str(transaction_id): int(revision) for transaction_id, revision in logged}
