"""The batch routes' answers: each item prepared (and maybe refused) on its own, the rest
given to one store call, and every answer put back in its item's place.

An item's refusal is answered as the single route answers it: the status of
:func:`~feltdb.server.errors.status_for` and the error body of every error answer, beside
each other (``{"status", "error": {"code", "message", "details"}}``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi.responses import JSONResponse

from feltdb.errors import WorkloadError
from feltdb.server.errors import error_body, status_for

Answer = TypeVar("Answer")


def refused(error: WorkloadError) -> dict[str, Any]:
    """An item's refusal: the status and the error body the single route answers."""
    return {"status": status_for(error), **error_body(error.code, error.message, error.details)}


def answered(
    answers: Sequence[Answer | WorkloadError],
    name: str,
    encode: Callable[[Answer], tuple[int, Any]],
    extra: Callable[[Answer], dict[str, Any]] | None = None,
) -> JSONResponse:
    """The batch's answer (200): ``{"items": [...]}``, each item ``{"status", name: …}``
    (``encode`` giving the status and the JSON of a value, ``extra`` any fields beside
    it) or its refusal.
    """
    items: list[dict[str, Any]] = []
    for answer in answers:
        if isinstance(answer, WorkloadError):
            items.append(refused(answer))
            continue
        status, value = encode(answer)
        item = {"status": status, name: value}
        if extra is not None:
            item.update(extra(answer))
        items.append(item)
    return JSONResponse({"items": items})
