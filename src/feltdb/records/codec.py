"""The one codec of the authority's records: their stored text, and reading it back.

The stored text of a record is its canonical JSON (keys sorted, ``,`` and ``:``, UTF-8,
no whitespace: :func:`~feltdb.storage.canonical.canonical_json`'s text), made from the
record's JSON-ready document (``msgspec.to_builtins``) by
:func:`~feltdb.storage.canonical.stored_json`. The storage keeps that document beside the
text, so it is made anyway; msgspec could write the text from the struct directly, but it
writes a float in exponent form otherwise than Python's ``json`` (``1e16`` for ``1e+16``),
and telling such text from a hash's hex digits costs more than the second pass saves.
Reading is msgspec's alone: one pass from the text to the struct, checking types only.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.base import Record
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.canonical import stored_json

_WORKLOAD: Final = msgspec.json.Decoder(Workload)


def stored_document(record: Record) -> tuple[dict[str, Any], str]:
    """``record``'s JSON-ready document and its canonical JSON text, each made once.

    Raises:
        ValueError: the record holds a value that is not JSON.
    """
    document = record.to_json()
    return document, stored_json(document)


def stored_workload(key: str, text: str | None, document: Any = None) -> Workload:
    """The workload a stored row holds, decoded from its ``text`` (or, without one,
    converted from its ``document``) and not validated beyond its types: the authority
    wrote it.
    A document of an older store that lacks a field added since
    (:attr:`Workload.OLDER_DEFAULTS`) reads with that field's meaning there.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the row is not a workload record
            (nor JSON at all).
    """
    try:
        try:
            if text is not None:
                return _WORKLOAD.decode(text)
            return msgspec.convert(document, Workload)
        except msgspec.ValidationError:
            # Perhaps an older store's document, lacking a field added since.
            if text is not None:
                document = msgspec.json.decode(text)
            if not isinstance(document, dict):
                raise
            completed = Workload.completed(document)
            if completed is document:  # it lacked none: the error stands
                raise
            return msgspec.convert(completed, Workload)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE,
            f"stored workload {DURABLE_WORK_COLLECTION}/{key} is not a valid workload "
            f"record: {error}",
        ) from error
