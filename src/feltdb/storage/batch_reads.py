"""What a database reads for a batch in one statement: the rows at many keys, and the rows
carrying any of many result ids.

:class:`BatchReads` is the part of the :class:`~feltdb.storage.base.Database` protocol that
a batch of commands reads ahead with (``feltdb.work.unit.UnitOfWork.read_ahead``), so that
a hundred completions cost two round trips, not two hundred; each read is at most
:data:`~feltdb.limits.MAX_PLANS_PER_BATCH` keys, and every key one index seek.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # base composes this protocol: the row type is only named here
    from feltdb.storage.base import StoredRow

__all__ = ["BatchReads"]


class BatchReads(Protocol):
    """Reads of many rows at once, each in one statement."""

    def get_rows(self, collection: str, keys: Sequence[str]) -> dict[str, StoredRow]:
        """The committed rows at ``keys``, by key; a key with no row is absent."""
        ...

    def rows_with_result_ids(
        self, collection: str, result_ids: Sequence[str]
    ) -> dict[str, list[StoredRow]]:
        """The rows whose index ``result_id`` is each of ``result_ids``, by result id (each
        list ordered by key); a result id no row carries is absent.
        """
        ...
