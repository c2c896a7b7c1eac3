"""The values every backend encodes the same way: rows and log entries, transaction ids,
the pairing of guards with writes, and the wording of a lost guard. Nothing here touches a
database: :mod:`feltdb.storage.engine` uses it inside and around its transactions.
"""

from __future__ import annotations

import heapq
import itertools
import json
import secrets
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar, overload

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import (
    VERSION_FIELD,
    Commit,
    CommittedTransaction,
    Mutation,
    Precondition,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.canonical import canonical_json, float_free_json
from feltdb.storage.index_columns import index_params

PROVENANCE_FIELDS: Final = ("work_id", "agent_id", "session_id", "delegator_id")
"""Audit fields the log also keeps as the transaction's own provenance."""

_ID_ALPHABET: Final = string.ascii_letters + string.digits
_ID_LENGTH: Final = 24


_ID_TABLE: Final = bytes(ord(_ID_ALPHABET[b % 62]) for b in range(256))
_ID_DROPPED: Final = bytes(range(248, 256))
"""Random bytes of 248 and above are dropped, because 248 = 4 * 62: the rest map evenly."""


def new_transaction_id(operation_id: str) -> str:
    """A fresh ``tx_`` + 24 alphanumerics transaction id, never equal to ``operation_id``.
    Each character is one random byte mapped by one ``bytes.translate`` (32 bytes cover 24
    characters unless more than 8 fall in the dropped range: about one draw in 2.4 million).
    """
    while True:
        chars = secrets.token_bytes(32).translate(_ID_TABLE, _ID_DROPPED)
        if len(chars) >= _ID_LENGTH:
            transaction_id = "tx_" + chars[:_ID_LENGTH].decode("ascii")
            if transaction_id != operation_id:
                return transaction_id


def invalid(message: str) -> WorkloadError:
    """``WORKLOAD_INVALID``: what the caller asked to store cannot be stored."""
    return WorkloadError(ErrorCode.WORKLOAD_INVALID, message)


def to_json(value: Any, what: str) -> str:
    """Canonical JSON of ``value``, or ``WORKLOAD_INVALID`` naming ``what`` is not JSON."""
    try:
        return canonical_json(value)
    except ValueError as error:
        raise invalid(f"{what} is not JSON: {error}") from error


_FLAT: Final = frozenset({str, int, bool, type(None)})
"""The types of an audit record's values that :func:`audit_json` writes by orjson."""


def audit_json(audit: Mapping[str, Any]) -> str:
    """The stored text of an audit record: its canonical JSON, made by
    :func:`~feltdb.storage.canonical.float_free_json` when every value is a string, an integer,
    a boolean or null (as the work layer's are: no float, so no NaN), else by
    :func:`to_json`, which refuses what is not JSON.
    """
    if type(audit) is dict and _FLAT.issuperset(map(type, audit.values())):
        try:
            return float_free_json(audit)
        except ValueError as error:  # a key that is not a string, say
            raise invalid(f"the audit record is not JSON: {error}") from error
    return to_json(audit, "the audit record")


def document_json(collection: str, key: str, document: Mapping[str, Any]) -> str:
    """The stored text of a document: canonical JSON without ``"__version"``."""
    if not isinstance(document, Mapping):
        raise invalid(f"the document at {collection}/{key} is not a JSON object")
    if VERSION_FIELD in document:
        document = {name: value for name, value in document.items() if name != VERSION_FIELD}
    return to_json(document, f"the document at {collection}/{key}")


def stored_row(collection: str, key: str, version: int, revision: int, document: str) -> StoredRow:
    """A row read back: its stored text, decoded (``"__version"`` stamped in) only when its
    ``document`` is first asked for (:attr:`StoredRow.document`).
    """
    return StoredRow(collection, key, version, revision, text=document)


class RowsDecodedOnRead(Sequence[StoredRow]):
    """Selected rows, each made (:func:`stored_row`) only when it is first read.

    A decision over a batch of candidates usually stops at the first one it can use, so
    decoding the whole batch up front would parse documents nobody reads.
    """

    def __init__(self, fetched: Sequence[tuple[str, str, int, int, str]]) -> None:
        self._fetched = fetched
        self._decoded: dict[int, StoredRow] = {}

    def __len__(self) -> int:
        return len(self._fetched)

    @overload
    def __getitem__(self, index: int) -> StoredRow: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StoredRow]: ...

    def __getitem__(self, index: int | slice) -> StoredRow | Sequence[StoredRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        position = range(len(self))[index]  # IndexError, and negative indexes, as a list
        row = self._decoded.get(position)
        if row is None:
            row = self._decoded[position] = stored_row(*self._fetched[position])
        return row


def prepare_writes(
    operation_id: str, mutations: Sequence[Mutation], audit: Mapping[str, Any] | None
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], int]]:
    """Validate a commit and serialize its writes, before any lock is taken: each write's
    parameters (index columns, collection, key, document text or ``None`` for a delete),
    and the position of each written address.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for an operation id that is not a string (it
            would poison every later read of the log), an address written twice, a
            document that is not JSON, or an audit record that is not an object or whose
            provenance fields are not strings.
    """
    if not isinstance(operation_id, str):
        raise invalid(f"the operation id must be a string, not {operation_id!r}")
    writes: list[dict[str, Any]] = []
    written: dict[tuple[str, str], int] = {}
    for position, mutation in enumerate(mutations):
        address = (mutation.collection, mutation.key)
        if address in written:
            raise invalid(f"{mutation.collection}/{mutation.key} is written twice in one commit")
        written[address] = position
        params = index_params(mutation.index)
        params["collection"] = mutation.collection
        params["key"] = mutation.key
        params["document"] = _stored_text(mutation)
        writes.append(params)
    if audit is not None:
        if not isinstance(audit, Mapping):
            raise invalid("the audit record is not a JSON object")
        check_provenance(audit)
    return writes, written


def _stored_text(mutation: Mutation) -> str | None:
    """The text a mutation stores: its ``encoded`` text if it has one (made once, by its
    caller), else its document's canonical JSON; ``None`` for a deletion.
    """
    if mutation.deletes:
        return None
    if mutation.encoded is not None:
        if not isinstance(mutation.encoded, str):
            raise invalid(
                f"the encoded document at {mutation.collection}/{mutation.key} is not text"
            )
        return mutation.encoded
    assert mutation.document is not None  # it does not delete, and has no text
    return document_json(mutation.collection, mutation.key, mutation.document)


def check_provenance(audit: Mapping[str, Any]) -> None:
    """Refuse provenance fields that are not strings.

    ``CommittedTransaction`` types them as strings: a value of another type would be
    committed and then fail every later read of the log, so it is refused up front.
    """
    for name in PROVENANCE_FIELDS:
        value = audit.get(name)
        if value is not None and not isinstance(value, str):
            raise invalid(f"audit field {name!r} must be a string or null, not {value!r}")


def guards(
    preconditions: Sequence[Precondition],
    writes: Sequence[Mapping[str, Any]],
    written: Mapping[tuple[str, str], int],
) -> tuple[list[tuple[Precondition, int]], list[Precondition]]:
    """Each precondition that guards anything, in order: those of rows the commit writes,
    each with the position in ``writes`` (see :func:`prepare_writes`) of the write it
    guards (a guard is checked by its write); and those of rows it only read, checked by
    reading them before anything is written.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``, before anything is written, for a row guarded
            twice, a guard that requires both no row and a version, or a deletion that
            requires the row to be absent.
    """
    paired: list[tuple[Precondition, int]] = []
    unwritten: list[Precondition] = []
    seen: set[tuple[str, str]] = set()
    for precondition in preconditions:
        if not precondition.require_absent and precondition.expected_version is None:
            continue
        address = (precondition.collection, precondition.key)
        where = f"{precondition.collection}/{precondition.key}"
        position = written.get(address)
        if address in seen:
            raise invalid(f"{where} is guarded twice in one commit")
        if precondition.require_absent and precondition.expected_version is not None:
            raise invalid(f"{where}: a guard requires no row or a version, not both")
        seen.add(address)
        if position is None:
            unwritten.append(precondition)
            continue
        if precondition.require_absent and writes[position]["document"] is None:
            raise invalid(f"{where}: a deletion cannot require the row to be absent")
        paired.append((precondition, position))
    return paired, unwritten


def logged_transaction(
    commit_revision: int,
    base_revision: int,
    transaction_id: str,
    committed_at: Any,
    operation_ids: list[str],
    keys: list[str],
    audit: str | None,
) -> CommittedTransaction:
    """A log row read back: its audit record decoded, and the record's provenance fields
    kept as the transaction's own.
    """
    record = None if audit is None else json.loads(audit)
    provenance = {} if record is None else {
        name: value for name in PROVENANCE_FIELDS if isinstance(value := record.get(name), str)
    }  # fmt: skip
    return CommittedTransaction(
        transaction_id=transaction_id,
        base_revision=base_revision,
        commit_revision=commit_revision,
        committed_at=committed_at,
        operation_ids=operation_ids,
        keys=keys,
        audit=record,
        **provenance,
    )


def lost_guard(precondition: Precondition, found: int | None) -> StorageConflict:
    """The conflict of ``precondition``, lost to a row at version ``found`` (``None``: no
    row). The same wording on every backend.
    """
    address = f"{precondition.collection}/{precondition.key}"
    details: dict[str, Any] = {
        "collection": precondition.collection,
        "key": precondition.key,
        "expected_version": precondition.expected_version,
        "found_version": found,
    }
    if precondition.require_absent and found is not None:
        return StorageConflict(f"{address}: expected no row, found version {found}", details)
    expected = precondition.expected_version
    if expected is not None and found != expected:
        found_text = "no row" if found is None else f"version {found}"
        return StorageConflict(
            f"{address}: expected version {expected}, found {found_text}", details
        )
    # The row is as the guard wanted it again: a third writer changed it back between the
    # guarded write and the read of its version (possible under PostgreSQL's READ
    # COMMITTED; SQLite's write lock excludes it). The write still lost.
    return StorageConflict(f"{address}: the row changed during the commit", details)


def committed(
    transaction_id: str,
    mutations: Sequence[Mutation],
    revision: int,
    versions: list[int | None],
    texts: Sequence[str | None],
) -> Commit:
    """What a commit returns: each row written, at its new version, as a row read back
    would be: its stored text (``texts``, in mutation order; ``None`` for a deletion), its
    document decoded from that text only if asked (:class:`StoredRow`).

    Nothing on the hot path reads a commit's documents, so none is copied nor parsed.
    """
    rows = [
        StoredRow(mutation.collection, mutation.key, version, revision, text=text)
        for mutation, version, text in zip(mutations, versions, texts, strict=True)
        if text is not None and version is not None
    ]
    return Commit(revision, transaction_id, rows)


R = TypeVar("R")


def keyset_page(
    select: Callable[[str, Mapping[str, Any]], list[StoredRow]],
    collection: str,
    tenant_id: str,
    application_id: str,
    state: str | None,
    after: tuple[int, int, str],
    limit: int,
) -> list[StoredRow]:
    """The rows after a cursor (:func:`past_position`, over the application's range or its
    state's); ``select`` runs a dialect's statement by name.
    """
    scope = "by_application" if state is None else "by_state"
    ranged = {
        "collection": collection,
        "tenant_id": tenant_id,
        "application_id": application_id,
        "state": state,
    }
    return past_position(
        lambda name, more, params: select(name, {**params, "limit": more}),
        f"page_rows_{scope}",
        ranged,
        after,
        limit,
    )


def past_position(
    fetch: Callable[[str, int, dict[str, Any]], list[R]],
    statements: str,
    ranged: Mapping[str, Any],
    after: tuple[int, int, str],
    limit: int,
) -> list[R]:
    """Up to ``limit`` rows (``-1``: all) of a range past ``after`` on ``(priority DESC,
    created_at, key)``, by two keyset seeks: ``{statements}_same_priority``, the rest of
    ``after``'s priority, then, if that does not fill the page, ``{statements}_lower_priority``.
    Neither reads a row before the position. ``fetch(name, limit, params)`` runs one.
    """
    priority, created_at, key = after
    position = {**ranged, "priority": priority, "created_at": created_at, "key": key}
    rows = fetch(f"{statements}_same_priority", limit, position)
    if limit < 0 or len(rows) < limit:
        more = -1 if limit < 0 else limit - len(rows)
        rows += fetch(f"{statements}_lower_priority", more, position)
    return rows


SelectedRow = tuple[str, str, int, int, str]
"""A selected row as fetched: ``(collection, key, version, revision, document)``."""


def _index_order(fetched: tuple[Any, ...]) -> tuple[bool, int, bool, int, str]:
    # fetched is (collection, key, version, revision, document, priority, created_at): the
    # index order is priority descending with NULL last, then created_at ascending with NULL
    # first, then key (code point order, as SQLite's BINARY and PostgreSQL's "C" collation).
    priority, created_at = fetched[5], fetched[6]
    return (
        priority is None,
        0 if priority is None else -priority,
        created_at is not None,
        0 if created_at is None else created_at,
        fetched[1],
    )


def merge_ranges(
    fetch: Callable[[R, int], Sequence[tuple[Any, ...]]],
    ranges: Sequence[R],
    offset: int,
    limit: int,
) -> list[SelectedRow]:
    """The rows of several index ranges (a definition's, or a claim group's) as one
    selection in index order.

    ``fetch(range, n)`` reads the first ``n`` rows of one range (``n`` negative: all of
    them) as ``(collection, key, version, revision, document, priority, created_at)``, in
    index order. Each range is read to ``offset + limit`` rows, the ranges are merged, and
    rows ``[offset, offset + limit)`` of the merge are returned, as the five selected
    columns. No range: no rows.
    """
    offset = max(offset, 0)
    depth = -1 if limit < 0 else offset + limit
    merged = heapq.merge(*(fetch(each, depth) for each in ranges), key=_index_order)
    stop = None if limit < 0 else offset + limit
    return [
        (row[0], row[1], row[2], row[3], row[4]) for row in itertools.islice(merged, offset, stop)
    ]
