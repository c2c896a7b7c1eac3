"""The base of every record the authority writes: a ``msgspec.Struct``.

A record is plain data. Constructing one validates nothing and an assignment validates
nothing: the authority makes its records from input it has already checked, and what it
wrote is not checked again when read. Validation happens where input enters:

- :meth:`Record.parse` (a dict or JSON text from outside: an HTTP answer, a legacy
  file) checks every field's type and bound and refuses ``WORKLOAD_INVALID`` naming the
  field;
- a pydantic model with a record-typed field (``CreateWorkload``, the HTTP bodies)
  validates that field as pydantic validates its own fields, by the record's declared
  types and bounds, with nested field paths (``retry_policy.max_attempts``). The same
  declaration (``feltdb.fields``' annotated types carry both libraries' bounds) feeds
  both checks and the OpenAPI schema.
"""

from __future__ import annotations

import inspect
import re
from typing import Annotated, Any, NotRequired, Self

import msgspec
from pydantic import ConfigDict, Field, GetCoreSchemaHandler
from pydantic._internal._docs_extraction import extract_docstrings_from_cls
from pydantic_core import core_schema
from typing_extensions import TypedDict

from feltdb.errors import ErrorCode, WorkloadError

_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_NAMED_FIELD = re.compile(r"(?:missing required|contains unknown) field `([^`]*)`")


def problem_path(error: msgspec.ValidationError) -> tuple[str, str]:
    """The dotted field path a msgspec validation error names (``retry_policy.max_attempts``,
    ``execution_history.0.to``, the missing or unknown field itself; ``""`` for the whole
    value) and its problem without the path.
    """
    message = str(error)
    problem, at, where = message.rpartition(" - at `")
    if not at:
        problem, where = message, "$`"
    steps = [name or index for name, index in _PATH_STEP.findall(where.rstrip("`")[1:])]
    named = _NAMED_FIELD.search(problem)
    if named is not None:
        steps.append(named.group(1))
    return ".".join(steps), problem


class Record(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A record: construct it with keywords; JSON by the reference's field names.

    ``gc=False``: a record holds values and other records, never itself, so the cyclic
    collector need not track it (a busy worker holds tens of thousands).
    """

    @classmethod
    def parse(cls, data: Any) -> Self:
        """Validate ``data``, a JSON object as decoded (a dict), into this record: every
        field's type and bound is checked. Nothing else is taken for one (a string is not
        read as JSON text: one record has one form).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming the first bad field.
        """
        try:
            parsed: Self = msgspec.convert(data, cls)
        except msgspec.ValidationError as error:
            raise _invalid(cls, error) from None
        return parsed

    @classmethod
    def parse_json(cls, text: str | bytes) -> Self:
        """Validate JSON ``text`` into this record, as :meth:`parse` validates a dict.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming the first bad field, or saying the
                text is not JSON.
        """
        try:
            parsed: Self = msgspec.json.decode(text, type=cls)
        except msgspec.ValidationError as error:
            raise _invalid(cls, error) from None
        except msgspec.DecodeError as error:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"invalid {cls.__name__}: not JSON: {error}",
                {"fields": [cls.__name__]},
            ) from None
        return parsed

    def to_json(self) -> dict[str, Any]:
        """This record as a JSON-ready dict with the reference's field names (sets as
        sorted lists, enumerations as their values).
        """
        document: dict[str, Any] = msgspec.to_builtins(self, order="deterministic")
        return document

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """Validate a record-typed field of a pydantic model: a record or a dict is checked
        field by field by this record's declared types (so pydantic names nested paths), then
        made into the record; it serializes by the same declaration (as :meth:`to_json`).
        """
        fields = msgspec.structs.fields(cls)
        described = extract_docstrings_from_cls(cls, use_inspect=True)
        typed: dict[str, Any] = {}
        for field in fields:
            declared = Field(
                alias=field.encode_name if field.encode_name != field.name else None,
                description=described.get(field.name),
                json_schema_extra=None if field.required else {"default": _default(field)},
            )
            kind = Annotated[field.type, declared]  # type: ignore[name-defined]
            typed[field.name] = kind if field.required else NotRequired[kind]
        shape = TypedDict(cls.__name__, typed)  # type: ignore[misc]
        shape.__pydantic_config__ = ConfigDict(  # type: ignore[attr-defined]
            extra="forbid" if cls.__struct_config__.forbid_unknown_fields else "ignore",
            validate_by_name=True,
            validate_by_alias=True,
            json_schema_extra={"description": inspect.cleandoc(cls.__doc__ or cls.__name__)},
        )
        checked = handler.generate_schema(shape)
        names = [field.name for field in fields]

        def unpacked(value: Any) -> Any:
            if isinstance(value, cls):
                return {name: getattr(value, name) for name in names}
            return value

        return core_schema.no_info_before_validator_function(
            unpacked,
            core_schema.no_info_after_validator_function(lambda items: cls(**items), checked),
            serialization=core_schema.plain_serializer_function_ser_schema(
                unpacked, return_schema=checked
            ),
        )


def _default(field: msgspec.structs.FieldInfo) -> Any:
    """A field's default as JSON (for the schema)."""
    value = field.default_factory() if field.default is msgspec.NODEFAULT else field.default
    return msgspec.to_builtins(value, order="deterministic")


def _invalid(record: type[Record], error: msgspec.ValidationError) -> WorkloadError:
    path, problem = problem_path(error)
    named = path or record.__name__
    return WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"invalid {record.__name__}: {named}: {problem}",
        {"fields": [named]},
    )


def frozen_members(record: msgspec.Struct, *names: str) -> None:
    """Make each named set field of ``record`` a frozenset, whatever iterable it was given
    (the records' sets accept any iterable and compare as sets). A string or a mapping is
    left as it is, so that validation refuses it rather than splitting it.
    """
    for name in names:
        value = getattr(record, name)
        if type(value) is not frozenset and not isinstance(value, str | bytes | dict):
            msgspec.structs.force_setattr(record, name, frozenset(value))
