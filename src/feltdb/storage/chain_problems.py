"""What :func:`feltdb.storage.audit_chain.verify` reports wrong: a :class:`ChainProblem` of
one :data:`ProblemKind` (the module :mod:`feltdb.storage.audit_chain` says what each means).

Apart from the chain so that the checks of the rows (:mod:`feltdb.storage.chain_index`,
:mod:`feltdb.storage.chain_writes`) name their problems as the chain names its own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["ChainProblem", "ProblemKind"]

ProblemKind = Literal[
    "altered",
    "removed",
    "inserted",
    "chain_altered",
    "anchor_mismatch",
    "row_altered",
    "row_unlogged",
    "index_altered",
    "row_missing",
    "row_stale",
]


class ChainProblem(BaseModel):
    """The first thing :func:`~feltdb.storage.audit_chain.verify` found wrong."""

    model_config = ConfigDict(frozen=True)

    kind: ProblemKind
    revision: int
    """The revision of the transaction concerned (for a row: the row's revision; for a
    missing row, or one older than the log says, the revision of the log's last write of
    it).
    """
    transaction_id: str | None = None
    address: str | None = None
    """``"collection/key"`` of the row concerned, for a row problem."""
    message: str
