"""The models a typed definition declares: pydantic models or msgspec Structs, and JSON.

A workload's input and output are JSON. A :class:`~feltdb.definitions.Definition` names a
model for each, and this module turns a model's instance (or a dict of its fields) into
that JSON and JSON back into an instance, refusing what does not fit with
``WORKLOAD_INVALID`` naming each bad field by path (``input.address.city``).

Both ways go through JSON text, checked in JSON mode: what is admitted is exactly what the
worker's model parses (a msgspec Struct is not validated when constructed, and a pydantic
model may be built unvalidated with ``model_construct``; both are checked here).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from pydantic import BaseModel, ValidationError

from feltdb.errors import ErrorCode, WorkloadError

Model = BaseModel | msgspec.Struct
"""What a typed definition's input and output are instances of."""

M = TypeVar("M", bound=Model)

_AT = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"missing required field `(?P<field>[^`]+)`")


def is_model(model: Any) -> bool:
    """Whether ``model`` is a class a definition may declare (pydantic or msgspec)."""
    return isinstance(model, type) and issubclass(model, BaseModel | msgspec.Struct)


def checked_model(model: Any, field: str) -> type[Model]:
    """``model`` if it is a pydantic model or a msgspec Struct class.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    if not is_model(model):
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"{field}: must be a pydantic model or a msgspec Struct class, not {model!r}",
            {"fields": [field]},
        )
    checked: type[Model] = model
    return checked


def to_json(model: type[M], value: Any, field: str) -> Any:
    """``value`` (an instance of ``model``, or a mapping of its fields) as JSON-ready data
    (pydantic's ``model_dump(mode="json", by_alias=True)``, msgspec's ``to_builtins``), once
    it is checked to parse back into ``model``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field`` (not an instance nor a
            mapping) or each bad field under it (``field.to``).
    """
    if isinstance(value, Mapping):
        value = from_json(model, dict(value), field)
    if isinstance(value, model):
        # What is stored is checked, not only what was given: the dump of a parsed value
        # must parse again (aliases, values a model writes otherwise than it reads).
        data = _dumped(value, field)
        from_json(model, data, field)
        return data
    raise WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"{field}: must be an instance of {model.__name__} or a dict of its fields,"
        f" not {type(value).__name__}",
        {"fields": [field]},
    )


def from_json(model: type[M], data: Any, field: str) -> M:
    """``data`` (JSON-ready: a workload's input or output) parsed into ``model``, as JSON
    text is.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming each bad field under ``field``.
    """
    try:
        # json, not orjson: orjson writes NaN and infinity as null (what would be checked
        # is not what is stored) and refuses integers past 64 bits (which JSON allows).
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, f"{field}: must be JSON: {error}", {"fields": [field]}
        ) from None
    if issubclass(model, BaseModel):
        try:
            return model.model_validate_json(text)
        except ValidationError as error:
            raise _pydantic_refusal(model.__name__, field, error) from None
    try:
        parsed: M = msgspec.json.decode(text, type=model)
    except msgspec.ValidationError as error:
        raise _msgspec_refusal(model.__name__, field, str(error)) from None
    return parsed


def _dumped(value: Model, field: str) -> Any:
    try:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True, warnings=False)
        return msgspec.to_builtins(value)
    except (TypeError, ValueError) as error:  # a value the model cannot write as JSON
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"{field}: cannot be written as JSON: {error}",
            {"fields": [field]},
        ) from None


def _refusal(name: str, field: str, problems: list[tuple[str, str]]) -> WorkloadError:
    """``WORKLOAD_INVALID``: ``field`` does not fit ``name``, each (path, problem) said."""
    paths = [f"{field}.{path}" if path else field for path, _ in problems]
    said = "; ".join(
        f"{path}: {problem}" for path, (_, problem) in zip(paths, problems, strict=True)
    )
    return WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"{field} does not match {name}: {said}",
        {"fields": list(dict.fromkeys(paths))},
    )


def _pydantic_refusal(name: str, field: str, error: ValidationError) -> WorkloadError:
    problems = [
        (".".join(str(part) for part in item["loc"]), item["msg"])
        for item in error.errors(include_url=False)
    ]
    return _refusal(name, field, problems)


def _msgspec_refusal(name: str, field: str, message: str) -> WorkloadError:
    """One problem as msgspec says it, its path written ``$.items[0].to``: named as pydantic's."""
    matched = _AT.match(message)
    assert matched is not None  # the pattern matches any text
    problem = matched["problem"]
    parts = re.findall(r"[^.\[\]]+", matched["path"] or "")
    missing = _MISSING.search(problem)
    if missing is not None:
        parts.append(missing["field"])
        problem = "Field required"
    return _refusal(name, field, [(".".join(parts), problem)])
