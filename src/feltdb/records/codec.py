"""The one codec of the authority's records: their stored text, and reading it back.

The stored text of a record is its canonical JSON (keys sorted, ``,`` and ``:``, UTF-8,
no whitespace: :func:`~feltdb.storage.canonical.canonical_json`'s text).

A workload's text is written by msgspec straight from the struct (``order="sorted"``
writes struct fields and dict keys in that order, and strings as the standard library
does) when it holds no float: msgspec writes some floats otherwise than Python's ``json``
(``1e16`` for ``1e+16``, ``0.00001`` for ``1e-05``). Only the three places a workload
keeps the caller's JSON can hold one (:data:`JSON_VALUED`: every other field is typed
without a float, which ``tests/unit/records/test_codec.py`` holds the declarations to),
so those alone are looked at. A workload that may hold a float, or whose JSON is large,
is written as any other record is: its JSON-ready document (``msgspec.to_builtins``),
then :func:`~feltdb.storage.canonical.stored_json`.

Reading is msgspec's alone: one pass from the text to the struct, checking types only.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.base import Record
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.canonical import stored_json

_WORKLOAD: Final = msgspec.json.Decoder(Workload)
_SORTED: Final = msgspec.json.Encoder(order="sorted")
_PLAIN: Final = msgspec.json.Encoder()

JSON_VALUED: Final = ("input", "checkpoints[].state", "result.output")
"""Where a workload keeps the caller's JSON (typed ``Any``): the only places a float can be."""

_FLOAT_MARK: Final = re.compile(rb"[0-9][.eE]")
"""A digit then a point or an exponent: in every float msgspec writes (``1.5``, ``1e16``);
in a string it only costs the slower path."""

_LOOKED_AT_BYTES: Final = 4096
"""JSON this long or longer is not searched for a float (the search costs about 2 ns a
byte): its workload takes the slower path, whose cost grows with the JSON anyway."""


def stored_document(record: Record) -> tuple[dict[str, Any], str]:
    """``record``'s JSON-ready document and its canonical JSON text, each made once.

    Raises:
        ValueError: the record holds a value that is not JSON.
    """
    document = record.to_json()
    return document, stored_json(document)


def stored_workload_text(workload: Workload) -> str:
    """``workload``'s stored text: :func:`stored_document`'s text, byte for byte, made in
    a third of the time when its JSON holds no float (see the module).

    Raises:
        ValueError: the workload holds a value that is not JSON.
    """
    result = workload.result
    json_valued = (
        workload.input,
        [checkpoint.state for checkpoint in workload.checkpoints],
        None if result is None else result.output,
    )
    try:
        looked_at = _PLAIN.encode(json_valued)
        if len(looked_at) < _LOOKED_AT_BYTES and _FLOAT_MARK.search(looked_at) is None:
            return _SORTED.encode(workload).decode()
    except (TypeError, ValueError, OverflowError):  # msgspec refuses it: so may the JSON
        pass
    return stored_document(workload)[1]


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
        raise _not_a_workload(key, error) from error


class WorkloadPlace(msgspec.Struct, frozen=True):
    """Where a stored workload stands, read without decoding the rest of its record: what
    a list needs to decide whether a reader sees it (its tenant, application, environment
    and definition) and where a page goes on after it (its place in the list's order).
    """

    workload_id: str
    tenant_id: str
    application_id: str
    environment: str
    definition_id: str
    priority: int
    created_at: int


_PLACE: Final = msgspec.json.Decoder(WorkloadPlace)


def stored_place(key: str, text: str) -> WorkloadPlace:
    """The :class:`WorkloadPlace` of a stored workload's ``text``: its other fields are
    parsed past, never built (a 1 MiB input of small keys costs no memory to skip).

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the text is not such a record.
    """
    try:
        return _PLACE.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise _not_a_workload(key, error) from error


def _not_a_workload(key: str, error: Exception) -> WorkloadError:
    return WorkloadError(
        ErrorCode.WORKLOAD_STORAGE_FAILURE,
        f"stored workload {DURABLE_WORK_COLLECTION}/{key} is not a valid workload record: {error}",
    )
