"""The audit chain's check of a row's index columns: they must be what its document implies.

The index columns beside a document (:class:`~feltdb.storage.base.RowIndex`) decide what
claims, listings and the maintenance passes see, and no hash covers them: a state or a
tenant edited there hides work from its claims, or lists it in another tenant's, while the
document stays as written. What a document implies is not storage's to know (for a
workload it is ``feltdb.work.scheduling.row_index``): :func:`~feltdb.storage.audit_chain.verify`
is given an :data:`IndexOf` per collection to check, and checks no other collection's.

Which columns are checked, and how:

- every column but the three below, exactly: each is written with the document, by the
  same statement, from the index its writer derived from it; and only ``update_index``
  (``rebuild_indexes``) writes one without the document, again the index it implies;
- ``claim_group``, exactly but for :data:`MIGRATED_GROUP` where a group is implied: the
  label the schema migration that added the column gave the rows then ready, kept until
  their next write (a claim reads such a range and checks each row, so it hides nothing);
- ``waits_on`` and ``waits_for``, only in part: both set or neither, and set only on a row
  its document makes claimable (a group implied). Which row it waits on, and for which
  state, cannot be checked: a claim sets a row aside without a new version or a log entry
  (``set_aside``), and a commit of the row it waits on releases it (``release_waiting``),
  so neither its document nor any entry says what they hold. A claimable row set aside
  behind the authority's back is therefore not found; it stays unclaimable until
  ``rebuild_indexes``, which releases every row set aside (claims set aside again what
  still waits).

An index an older release derived otherwise than this one does (after an upgrade that
changes the derivation, before ``rebuild_indexes``) is reported too: it is not what the
document implies, and claims read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from feltdb.errors import WorkloadError
from feltdb.storage.base import RowIndex
from feltdb.storage.chain_log import RawRow
from feltdb.storage.chain_problems import ChainProblem
from feltdb.storage.index_columns import INDEX_NAMES

__all__ = ["MIGRATED_GROUP", "IndexOf", "index_problem"]

IndexOf = Callable[[str, str], RowIndex]
"""The index a row's document implies, from the row's key and stored text. It raises
``WorkloadError`` or ``ValueError`` for a text it cannot read: that row's index is not
checked (its hash says whether the text is the one written).
"""

MIGRATED_GROUP: Final = "unsorted"
"""The claim group the migration that added ``claim_group`` gave the rows then ready."""

_PARTLY: Final = ("claim_group", "waits_on", "waits_for")
_EXACT: Final = tuple(name for name in INDEX_NAMES if name not in _PARTLY)
"""The columns checked exactly (see the module)."""


def index_problem(row: RawRow, index_of: IndexOf) -> ChainProblem | None:
    """The problem with ``row``'s index columns (:attr:`RawRow.index`), if any: those that
    are not what ``index_of`` says its document implies, checked as the module says.
    ``None`` too for a row read without its index, or whose document ``index_of`` cannot
    read.
    """
    if len(row.index) != len(INDEX_NAMES):
        return None
    try:
        implied = index_of(row.key, row.document)
    except (WorkloadError, ValueError):
        return None
    wrong = _differing(dict(zip(INDEX_NAMES, row.index, strict=True)), implied)
    if not wrong:
        return None
    address = f"{row.collection}/{row.key}"
    return ChainProblem(
        kind="index_altered",
        revision=row.revision,
        address=address,
        message=f"row {address}'s index columns are not what its document (version "
        f"{row.version}) implies: {'; '.join(wrong)}. They were edited behind the "
        "authority's back, or derived by an older release (rebuild_indexes derives them "
        "again)",
    )


def _differing(stored: Mapping[str, Any], implied: RowIndex) -> list[str]:
    """What differs between the ``stored`` columns and the ``implied`` index, each said."""
    wrong = [
        f"{name} {stored[name]!r}, not {getattr(implied, name)!r}"
        for name in _EXACT
        if not _same(stored[name], getattr(implied, name))
    ]
    group, implied_group = stored["claim_group"], implied.claim_group
    if not _same(group, implied_group) and (implied_group is None or group != MIGRATED_GROUP):
        wrong.append(f"claim_group {group!r}, not {implied_group!r}")
    waits_on, waits_for = stored["waits_on"], stored["waits_for"]
    if (waits_on is None) != (waits_for is None):
        wrong.append(f"waits_on {waits_on!r} and waits_for {waits_for!r}: set aside by half")
    elif waits_on is not None and implied_group is None:
        wrong.append(f"waits_on {waits_on!r}: set aside, though its document is not claimable")
    return wrong


def _same(stored: Any, implied: Any) -> bool:
    # Of the same type too: SQLite keeps a value of any type in any column, and 1.0 or
    # True would equal 1 while claims compare them otherwise.
    return type(stored) is type(implied) and stored == implied
