"""The storage seam: rows, versions, compare-and-set, revisions and the transaction log.

Internal: this protocol is the thinnest layer feltdb needs from a database, and it may
change between releases. It speaks plain dicts and JSON, never domain models; the work
layer (``feltdb.work``) is its only client.

The contract every backend keeps, bit for bit:

* A row is keyed by ``(collection, key)`` and holds a JSON object, its *document*. Every
  document read back carries ``"__version"``: the row's version, an integer that is 1 when
  the row is first written and grows by one with every later write of it.
* The store has one *revision*, an integer that strictly increases with every commit (not
  necessarily by one: PostgreSQL numbers a commit by its transaction's id and its place
  in that transaction, see :meth:`Database.commit_many`); 0 before any. The log only grows
  at its end: a reader that has seen revision R never later gets a commit numbered R or
  less. :meth:`Database.current_revision` is the greatest revision readable from the log,
  so it may lag a commit that has just returned while an older transaction of another
  writer is still open.
* :meth:`Database.commit` applies several mutations atomically, or none. Each
  :class:`Precondition` guards a row the commit writes and is checked by that write, or a
  row it only read, checked after the guarded writes (on PostgreSQL the row is held
  against writers until the commit ends, and a row being written at that moment is not
  waited for: the guard is lost), in the same transaction; if any fails, nothing is
  written and :class:`StorageConflict` (code ``WORKLOAD_CONFLICT``) is raised.
* Every commit appends one :class:`CommittedTransaction` to the log, in the same
  transaction as its rows, so the log and the rows can never disagree, with the hash of
  each row it wrote (:class:`~feltdb.storage.chain_log.ChainLog`, the audit chain's). A
  :meth:`Database.commit_many` batch is several commits in one transaction: one log
  entry, one revision, per committed plan.
* Beside each document the backend keeps a :class:`RowIndex`, the few fields the
  scheduler selects and orders on, as indexed columns. The caller computes it from the
  document and passes it with every write; the backend never reads the document to
  fill it. Queries over the index never scan the collection.
* Any other database failure is :class:`~feltdb.errors.WorkloadError` with code
  ``WORKLOAD_STORAGE_FAILURE``, the driver's exception as ``__cause__``.

:class:`~feltdb.storage.engine.SQLEngine` implements the protocol once for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.batch_reads import BatchReads
from feltdb.storage.canonical import json_object
from feltdb.storage.chain_log import ChainLog
from feltdb.storage.counts import IndexCounts
from feltdb.storage.definition_pages import DefinitionPages
from feltdb.storage.held import HeldCommits
from feltdb.storage.readiness import Readiness
from feltdb.storage.retention_reads import RetentionReads
from feltdb.storage.selecting import SelectingCommits
from feltdb.storage.statistics import PlannerStatistics
from feltdb.storage.wakeups import Wakeups

VERSION_FIELD = "__version"
"""The document field that carries the row's version when a row is read back."""


class StorageConflict(WorkloadError):
    """A precondition of a commit failed: another writer committed first. Nothing was written."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(ErrorCode.WORKLOAD_CONFLICT, message, details)


def storage_failure(message: str) -> WorkloadError:
    """The error for a database that could not be read or written."""
    return WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, message)


@dataclass(frozen=True, slots=True)
class RowIndex:
    """The scheduling fields kept as indexed columns beside a document; all optional."""

    tenant_id: str | None = None
    application_id: str | None = None
    state: str | None = None
    priority: int | None = None
    created_at: int | None = None
    eligible_at: int | None = None
    """Not claimable before this instant (``None``: as soon as it is ready)."""
    lease_expires_at: int | None = None
    """When the current claim's lease expires (``None``: no live claim)."""
    deadline_at: int | None = None
    """The earliest instant at which a deadline of the row falls (``None``: none)."""
    result_id: str | None = None
    definition_id: str | None = None
    """What kind of work the row is: with ``claim_group``, the index range a claim reads."""
    claim_group: str | None = None
    """Only while claimable: its partition of ready work (:mod:`feltdb.storage.partitions`)."""
    waits_on: str | None = None
    """Only while set aside (:class:`SetAside`; every write of the row clears it): the key
    of the row it waits on. A row set aside is not claimable, and never selected."""
    waits_for: str | None = None
    """Only while set aside: the ``state`` the row it waits on must be written in."""
    environment: str | None = None
    """With ``state``, the index range a list constrained to some environments reads."""


@dataclass(frozen=True, slots=True, eq=False)
class StoredRow:
    """A committed row. ``document`` includes ``"__version"`` equal to ``version``.

    A row read back keeps its stored ``text`` and decodes ``document`` only when first
    asked (the work layer validates a workload from the text, never needing the dict).
    """

    collection: str
    key: str
    version: int
    revision: int
    """The store revision of the commit that last wrote this row."""
    _document: dict[str, Any] | None = None
    text: str | None = field(default=None, kw_only=True)
    """The document as stored (canonical JSON, without ``"__version"``), when known."""

    @property
    def document(self) -> dict[str, Any]:
        """The document; ``WORKLOAD_STORAGE_FAILURE`` if the stored text is not an object."""
        document = self._document
        if document is None:
            try:
                document = json_object(self.text or "")
            except ValueError as error:
                where = f"{self.collection}/{self.key}"
                raise storage_failure(f"the stored document at {where} {error}") from error
            document[VERSION_FIELD] = self.version
            object.__setattr__(self, "_document", document)
        return document

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredRow):
            return NotImplemented
        mine = (self.collection, self.key, self.version, self.revision, self.document)
        return mine == (other.collection, other.key, other.version, other.revision, other.document)


@dataclass(frozen=True, slots=True)
class Precondition:
    """A guard of a row, checked inside the commit's transaction: by the commit's write of
    it, or, for a row the commit does not write (one its decision read), by reading it
    (held against other writers until the commit ends; lost, never waited for, while
    another transaction writes it).

    ``require_absent``: the row must not exist (so the write creates it).
    ``expected_version``: the row must exist at exactly this version. Neither: no guard.
    One of the two, on one row at most once, and never ``require_absent`` on a deletion.
    """

    collection: str
    key: str
    require_absent: bool = False
    expected_version: int | None = None


@dataclass(frozen=True, slots=True)
class Mutation:
    """Write ``document`` (without ``"__version"``; the backend stamps it) at a key.

    ``encoded``, when given, is the document's canonical JSON (``canonical_json(document)``,
    without ``"__version"``) already made by the caller: it is stored as it is, and not
    made again; ``document`` may then be ``None`` (the caller made the text without the
    dict). With neither, the mutation deletes the row (:attr:`deletes`).
    """

    collection: str
    key: str
    document: Mapping[str, Any] | None
    index: RowIndex = field(default_factory=RowIndex)
    encoded: str | None = None
    releases: bool = False
    """The rows of its tenant's application set aside waiting on this row are claimable
    again, in the same transaction, whatever state they wait for (the work layer sets it
    when the row is written in a state work rests in: each wait is then met, or never will
    be, and a claim reading the row again decides which)."""

    @property
    def deletes(self) -> bool:
        """Whether this mutation deletes its row (it has neither a document nor a text)."""
        return self.document is None and self.encoded is None


class CommittedTransaction(BaseModel):
    """One committed transaction, as the log keeps it.

    The provenance fields (``work_id``, ``agent_id``, ``session_id``, ``delegator_id``)
    are read from the audit record's fields of the same names, when present.
    """

    model_config = ConfigDict(frozen=True)

    transaction_id: str
    base_revision: int
    """The current revision when the commit was made; less than ``commit_revision``."""
    commit_revision: int
    committed_at: float
    """Unix time, in seconds, at which the backend committed it."""
    operation_ids: list[str]
    keys: list[str] = Field(default_factory=list)
    """``"collection/key"`` of every row written, in mutation order."""
    audit: dict[str, Any] | None = None
    work_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    delegator_id: str | None = None


@dataclass(frozen=True, slots=True)
class Commit:
    """What a commit wrote: the new revision and each written row as committed."""

    revision: int
    transaction_id: str
    rows: list[StoredRow]


RowReader = Callable[[str, str], "StoredRow | None"]
"""Reads one row by ``(collection, key)`` inside the transaction that is choosing."""


@dataclass(frozen=True, slots=True)
class PlannedCommit:
    """A commit that :meth:`Database.commit_selected`'s ``choose`` asks for."""

    operation_id: str
    mutations: Sequence[Mutation]
    preconditions: Sequence[Precondition] = ()
    audit: Mapping[str, Any] | None = None


class Database(
    BatchReads,
    ChainLog,
    DefinitionPages,
    HeldCommits,
    IndexCounts,
    PlannerStatistics,
    Readiness,
    RetentionReads,
    SelectingCommits,
    Protocol,
):
    """The operations the work layer needs from a backend. Safe to share between threads."""

    target: str
    """Where this database lives (a file path or a URL without its password)."""

    @property
    def wakeups(self) -> Wakeups | None:
        """Wake-up hints between processes (PostgreSQL's ``NOTIFY``); ``None``: none."""
        ...

    def get_row(self, collection: str, key: str) -> StoredRow | None:
        """The committed row at a key, or ``None``."""
        ...

    def list_rows(
        self,
        collection: str,
        *,
        tenant_id: str | None = None,
        application_id: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> list[StoredRow]:
        """Rows of a collection, filtered on index fields (``None``: any), ordered by
        priority descending, then ``created_at`` ascending, then key.
        """
        ...

    def page_rows(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str | None,
        after: tuple[int, int, str] | None,
        *,
        limit: int,
    ) -> list[StoredRow]:
        """One page of :meth:`list_rows`'s rows of one tenant's application (and ``state``,
        unless ``None``), in its order: the first ``limit`` rows that sort after ``after``,
        the ``(priority, created_at, key)`` of the previous page's last row (``None``: from
        the start). A keyset seek over the index, never an ``OFFSET`` scan: a page costs
        the same however deep it is. After the first page, only rows whose ``priority`` and
        ``created_at`` are set (every scheduled row's are) are paged.
        """
        ...

    def rows_due(self, collection: str, column: str, now: int, *, limit: int) -> list[StoredRow]:
        """Rows whose ``column`` (``"lease_expires_at"`` or ``"deadline_at"``) is
        ``<= now``, earliest first; served by an index.
        """
        ...

    def current_revision(self) -> int:
        """The greatest revision readable from the log (0 before any commit):
        ``committed_transactions_after(current_revision())`` is empty.
        """
        ...

    def commit(
        self,
        operation_id: str,
        mutations: Sequence[Mutation],
        preconditions: Sequence[Precondition] = (),
        audit: Mapping[str, Any] | None = None,
    ) -> Commit:
        """Apply ``mutations`` atomically if every precondition holds.

        Each written row's version is its previous version + 1, or 1 for a new row; a
        ``None`` document deletes the row. One transaction is logged, with
        ``operation_id``, the written keys (in mutation order) and ``audit``.

        Raises:
            StorageConflict: a precondition failed; nothing was written.
            WorkloadError: ``WORKLOAD_INVALID`` for a document or audit that is not JSON,
                a key written twice, a precondition that is not one guard of a row the
                commit writes (see :class:`Precondition`), or a value the database cannot
                store (an integer outside 64 bits); ``WORKLOAD_STORAGE_FAILURE`` for any
                other database failure. Nothing was written.
        """
        ...

    def commit_many(self, plans: Sequence[PlannedCommit]) -> list[Commit | StorageConflict]:
        """Apply each plan as :meth:`commit` would, in order, all in one write transaction
        (one sync to disk); answer, per plan and in order, its :class:`Commit` or the
        :class:`StorageConflict` :meth:`commit` would have raised for it (same message and
        details).

        Each plan is its own commit: guarded by its own preconditions, checked against the
        store as the batch's earlier plans leave it (a plan may guard on a version an
        earlier plan wrote), and logged as its own entry, with its operation id, keys and
        audit. A plan whose guard fails writes and logs nothing; the others still commit.
        The committed plans' revisions are consecutive integers in the batch's order, and
        each one's ``base_revision`` is the previous one's revision (the first's is the
        current revision, as for :meth:`commit`). On PostgreSQL a revision is the
        transaction's id times 1024, plus the commit's place among the transaction's
        committed plans (0 for :meth:`commit` and :meth:`commit_selected`).

        Nothing is acknowledged before the transaction has committed, and readers see the
        batch's log entries and rows all at once. An empty ``plans`` answers ``[]`` and
        opens no transaction.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for more than
                :data:`~feltdb.limits.MAX_PLANS_PER_BATCH` plans, or for any plan
                :meth:`commit` refuses as invalid (checked for every plan before anything
                is written; a value only the database refuses, such as an integer outside
                64 bits, is found while writing): the whole batch is
                refused. ``WORKLOAD_STORAGE_FAILURE`` for any other database failure.
                Whatever is raised, nothing was written.
        """
        ...

    def update_index(self, collection: str, key: str, index: RowIndex) -> bool:
        """Replace a row's index fields, leaving its document, version and the revision
        alone (the index is derived from the document, and this rebuilds it: see
        ``WorkloadStore.rebuild_indexes``). ``False`` if there is no such row.
        """
        ...

    def committed_transactions_after(
        self, revision: int, limit: int | None = None
    ) -> list[CommittedTransaction]:
        """Logged transactions with ``commit_revision > revision``, oldest first."""
        ...

    def committed_transactions_before(
        self, revision: int, limit: int
    ) -> list[CommittedTransaction]:
        """At most ``limit`` logged transactions below ``revision``, newest first."""
        ...

    def joined(self, connection: object) -> Database:
        """This database as seen from the caller's open transaction on ``connection`` (a
        ``psycopg`` connection to this PostgreSQL database, a ``sqlite3`` one to this
        file): its reads and commits run in that transaction, which only the caller
        commits or rolls back (:mod:`feltdb.storage.joined`).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for a connection of another driver, to
                another database, or outside a transaction.
        """
        ...

    def close(self) -> None:
        """Release every connection. Further calls fail with ``WORKLOAD_STORAGE_FAILURE``."""
        ...
