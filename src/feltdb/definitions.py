"""Typed definitions: a definition declared once, with its input and output models and the
fields every submission of it carries.

>>> class EmailIn(pydantic.BaseModel):
...     to: str
>>> class EmailOut(pydantic.BaseModel):
...     message_id: str
>>> send_email = Definition("send-email", input=EmailIn, output=EmailOut,
...                         capabilities={"email:send"}, retry_policy={"max_attempts": 5})
>>> workload, created = send_email.submit(client, EmailIn(to="ada@example.com"), key="k1")

The input is checked against its model before anything is sent: a value that does not fit
is refused ``WORKLOAD_INVALID`` naming each bad field (``input.to``), and nothing is
admitted. A worker serves it with ``@worker.handler(send_email)``: its handler is called as
``handler(ctx, email)`` with the parsed input, and what it returns is checked against the
output model (:mod:`feltdb.worker.typed`). Models are pydantic models or msgspec Structs;
the JSON stored is pydantic's ``model_dump(mode="json")`` or msgspec's ``to_builtins``.
Untyped work (``client.admit``, ``@worker.handler("send-email")``) is unchanged.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar, Unpack, cast, overload

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.typed_models import Model, checked_model, from_json, to_json
from feltdb.work import inputs
from feltdb.work.submission import Submission, admission_request, submission_fields

if TYPE_CHECKING:
    from feltdb.auth import SignedGrant
    from feltdb.records.workload import (
        ApprovalPolicy,
        Workload,
        WorkloadDependency,
        WorkloadRetryPolicy,
        WorkloadTimeouts,
    )
    from feltdb.work.models import CreateWorkload, Request
    from feltdb.work.store import WorkloadStore

In = TypeVar("In", bound=Model)
Out = TypeVar("Out")


class SharedOptions(TypedDict, total=False):
    """What a definition gives every submission, and a submission may give otherwise."""

    environment: str
    capabilities: Iterable[str]
    connection_scopes: Iterable[str]
    priority: int
    retry_policy: WorkloadRetryPolicy | Mapping[str, Any]
    timeouts: WorkloadTimeouts | Mapping[str, Any]
    approval: ApprovalPolicy | Mapping[str, Any]
    rate_limit: str


class DefinitionOptions(SharedOptions, total=False):
    """A definition's fields beyond its id and models (see :class:`Definition`)."""

    revision: str


class SubmitOptions(SharedOptions, total=False):
    """One submission's fields beyond the definition's (see :meth:`Definition.submit`)."""

    trigger: str
    session_id: str
    not_before: int
    dependencies: Iterable[WorkloadDependency | Mapping[str, Any]]
    concurrency_key: str
    concurrency_limit: int
    rate_key: str
    fairness_key: str


RENAMED = {"capabilities": "capability_snapshot", "revision": "definition_revision"}
"""Option names that differ from the submission's field names."""

SET_VALUED = ("capabilities", "connection_scopes", "dependencies")


class Submits(Protocol):
    """A client (:class:`~feltdb.client.Client`, :class:`~feltdb.client.LocalClient`)."""

    def submit(self, submission: Request) -> tuple[Workload, bool]:
        """Admit ``submission`` (see :meth:`~feltdb.client.WorkloadClient.submit`)."""
        ...


class SubmitsAsync(Protocol):
    """An async client: its ``submit`` is awaited."""

    def submit(self, submission: Request) -> Awaitable[tuple[Workload, bool]]:
        """Admit ``submission``, awaited."""
        ...


def _fields(options: Mapping[str, Any], allowed: Iterable[str]) -> dict[str, Any]:
    """``options`` as submission fields (renamed, sets as lists); an unknown name refused."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"{', '.join(unknown)}: not a field of a typed definition's submission"
            f" (known: {', '.join(sorted(allowed))})",
            {"fields": unknown},
        )
    fields: dict[str, Any] = {}
    for name, value in options.items():
        if name in SET_VALUED and value is not None and not isinstance(value, str | bytes):
            value = list(value)
        fields[RENAMED.get(name, name)] = value
    return fields


def _renamed_refusal(error: WorkloadError) -> WorkloadError:
    """``error`` naming the options as a definition spells them (``capabilities``)."""
    message = error.message
    fields = list((error.details or {}).get("fields", []))
    for option, field in RENAMED.items():
        message = message.replace(field, option)
        fields = [name.replace(field, option) for name in fields]
    return WorkloadError(error.code, message, {"fields": fields})


class Definition(Generic[In, Out]):
    """A definition declared once: its id, its input model, its output model (``None``:
    any JSON), and the fields each submission of it carries unless told otherwise.

    Args:
        definition_id: the workloads' ``definition_id`` (what a worker serves).
        input: the input's model (a pydantic model or a msgspec Struct class).
        output: the output's model, or ``None`` for any JSON output.
        revision: ``definition_revision`` (default ``"1"``).
        environment, capabilities, connection_scopes, priority, retry_policy, timeouts,
            approval, rate_limit: the submission's fields of those names
            (``capabilities`` is its ``capability_snapshot``); left out, the submission's
            defaults (environment ``production``, no capabilities, priority 0, …).

    A definition is frozen. Its arguments are checked when it is made.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the bad argument (a model that is not
            one, a blank id, a capability that is not an identifier, a bad policy field,
            an unknown option).
    """

    __slots__ = ("definition_id", "fields", "input", "output")

    definition_id: str
    input: type[In]
    output: type[Model] | None
    fields: Mapping[str, Any]
    """The submission fields the definition gives (JSON, read-only)."""

    @overload
    def __init__(
        self: Definition[In, Any],
        definition_id: str,
        *,
        input: type[In],
        output: None = None,
        **options: Unpack[DefinitionOptions],
    ) -> None: ...

    @overload
    def __init__(
        self,
        definition_id: str,
        *,
        input: type[In],
        output: type[Out],
        **options: Unpack[DefinitionOptions],
    ) -> None: ...

    def __init__(
        self, definition_id: str, *, input: Any, output: Any = None, **options: Any
    ) -> None:
        inputs.identifier(definition_id, "definition_id")
        checked_model(input, "input")
        if output is not None:
            checked_model(output, "output")
        fields = _fields(options, DefinitionOptions.__optional_keys__)
        for name in ("definition_revision", "environment", "rate_limit"):
            if fields.get(name) is not None:
                inputs.identifier(fields[name], _option(name))
        for name in ("capability_snapshot", "connection_scopes"):
            if fields.get(name) is not None:
                inputs.identifiers(fields[name], _option(name))
        try:
            checked = Submission.parse({**fields, "definition_id": definition_id, "input": None})
        except WorkloadError as error:
            raise _renamed_refusal(error) from None
        given = submission_fields(checked)
        del given["definition_id"], given["input"]
        object.__setattr__(self, "definition_id", definition_id)
        object.__setattr__(self, "input", input)
        object.__setattr__(self, "output", output)
        object.__setattr__(self, "fields", MappingProxyType(given))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Definition is frozen: {name} cannot be set")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Definition is frozen: {name} cannot be deleted")

    def __repr__(self) -> str:
        output = self.output.__name__ if self.output is not None else None
        return (
            f"Definition({self.definition_id!r}, input={self.input.__name__},"
            f" output={output}, revision={self.revision!r})"
        )

    @property
    def revision(self) -> str:
        """The ``definition_revision`` of its submissions."""
        revision: str = self.fields.get("definition_revision", "1")
        return revision

    @property
    def capabilities(self) -> frozenset[str]:
        """The capabilities its submissions require (their ``capability_snapshot``)."""
        return frozenset(self.fields.get("capability_snapshot", ()))

    # ------------------------------------------------------------------ values

    def encode_input(self, value: In | Mapping[str, Any]) -> Any:
        """``value`` (an instance of the input model, or a dict of its fields) as the
        workload's JSON input.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field (``input.to``).
        """
        return to_json(self.input, value, "input")

    def parse_input(self, data: Any) -> In:
        """A workload's JSON input as the input model.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field (``input.to``).
        """
        return from_json(self.input, data, "input")

    def encode_output(self, value: Any) -> Any:
        """A handler's return value as the workload's JSON output: with an output model,
        an instance of it (or a dict of its fields), checked; without, ``value`` unchanged.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field (``output.sent``).
        """
        if self.output is None:
            return value
        return to_json(self.output, value, "output")

    def output_of(self, workload: Workload) -> Out | None:
        """What ``workload`` produced, as the output model (its JSON without one);
        ``None`` while it has no result.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``: the workload is another definition's, or
                its output does not match the model (naming each bad field).
        """
        if workload.definition_id != self.definition_id:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"workload {workload.workload_id} is of definition {workload.definition_id!r},"
                f" not {self.definition_id!r}",
                {"fields": ["definition_id"]},
            )
        if workload.result is None:
            return None
        if self.output is None:
            raw: Out = workload.result.output
            return raw
        return cast(Out, from_json(self.output, workload.result.output, "output"))

    # ------------------------------------------------------------------ submitting

    def submission(
        self, value: In | Mapping[str, Any], *, key: str, **options: Unpack[SubmitOptions]
    ) -> Request:
        """The :data:`~feltdb.work.submission.Submission` of ``value`` under idempotency
        key ``key``: the definition's fields, with ``options`` given instead.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field (of the input:
                ``input.to``); nothing is sent.
        """
        data = self.encode_input(value)
        fields = _fields(options, SubmitOptions.__optional_keys__)
        try:
            submission: Request = Submission.parse(
                {
                    **self.fields,
                    **{name: given for name, given in fields.items() if given is not None},
                    "definition_id": self.definition_id,
                    "input": data,
                    "idempotency_key": key,
                }
            )
        except WorkloadError as error:
            raise _renamed_refusal(error) from None
        return submission

    def submit(
        self,
        target: Submits | WorkloadStore,
        value: In | Mapping[str, Any],
        *,
        key: str,
        grant: SignedGrant | None = None,
        now: int | None = None,
        **options: Unpack[SubmitOptions],
    ) -> tuple[Workload, bool]:
        """Admit ``value`` (checked against the input model first: nothing is admitted
        when it does not fit) through ``target``, or answer the workload already admitted
        under ``key``; ``True`` when this call created it.

        ``target`` is a client (:class:`~feltdb.client.Client`,
        :class:`~feltdb.client.LocalClient`: the requester is its caller), or a
        :class:`~feltdb.work.store.WorkloadStore` with ``grant``, the signed grant the
        submission is made under (its subject is the requester, its tenant and
        application the work's), at ``now`` (default: the clock's). An async client
        takes :meth:`submit_async`.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field, or whatever the
                authority refuses (``IDEMPOTENCY_KEY_REUSED``, ``WORKLOAD_UNAUTHORIZED``…).
        """
        submission = self.submission(value, key=key, **options)
        submit = getattr(target, "submit", None)
        if submit is None:
            store: WorkloadStore = target  # type: ignore[assignment]
            return store.admit(self._request(submission, grant, now))
        if grant is not None or now is not None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "grant, now: a client submits under its own credential and clock",
                {"fields": ["grant" if grant is not None else "now"]},
            )
        answer = submit(submission)
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()  # never awaited: nothing was sent
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "target: an async client: use `await definition.submit_async(...)`",
                {"fields": ["target"]},
            )
        admitted: tuple[Workload, bool] = answer
        return admitted

    async def submit_async(
        self,
        client: SubmitsAsync,
        value: In | Mapping[str, Any],
        *,
        key: str,
        **options: Unpack[SubmitOptions],
    ) -> tuple[Workload, bool]:
        """:meth:`submit` through an async client (its ``submit`` awaited)."""
        submission = self.submission(value, key=key, **options)
        return await client.submit(submission)

    def request(
        self,
        value: In | Mapping[str, Any],
        *,
        key: str,
        grant: SignedGrant,
        now: int | None = None,
        **options: Unpack[SubmitOptions],
    ) -> CreateWorkload:
        """The :class:`~feltdb.work.models.CreateWorkload` that admits ``value`` to a
        store under ``grant`` (see :meth:`submit`), for ``store.admit`` and
        ``store.admit_many`` (and their ``connection=``).
        """
        return self._request(self.submission(value, key=key, **options), grant, now)

    def _request(
        self, submission: Request, grant: SignedGrant | None, now: int | None
    ) -> CreateWorkload:
        if grant is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "grant: a submission to a store names the signed grant it is made under",
                {"fields": ["grant"]},
            )
        return admission_request(
            submission,
            tenant_id=grant.grant.tenant_id,
            application_id=grant.grant.application_id,
            requested_by=grant.grant.subject,
            authorization_snapshot=grant,
            created_at=now if now is not None else int(time.time()),
        )


def _option(field: str) -> str:
    """The option that gives submission field ``field``."""
    return next((option for option, name in RENAMED.items() if name == field), field)
