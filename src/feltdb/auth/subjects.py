"""Subjects: who acts. Humans, agents, services, workers, workloads and connections."""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec
from pydantic import BeforeValidator, Field, PlainSerializer

from feltdb.fields import MAX_ID_CHARS, as_frozenset, sorted_list
from feltdb.records.base import Record


class SubjectKind(enum.StrEnum):
    """The kinds of subject, as they serialize."""

    HUMAN = "human"
    AGENT = "agent"
    SERVICE = "service"
    WORKER = "worker"
    WORKLOAD = "workload"
    CONNECTION = "connection"


class Subject(Record, frozen=True, order=True, kw_only=True):  # type: ignore[misc]
    """An identity: a kind and an id. Hashable, ordered and equal by ``(kind, id)``.

    Serializes as ``{"kind": "human", "id": "ada"}``.
    """

    kind: SubjectKind
    id: Annotated[str, Field(max_length=MAX_ID_CHARS), msgspec.Meta(max_length=MAX_ID_CHARS)]

    @classmethod
    def human(cls, id: str) -> Subject:
        """A person."""
        return cls(kind=SubjectKind.HUMAN, id=id)

    @classmethod
    def agent(cls, id: str) -> Subject:
        """An AI agent: its output is never an approval."""
        return cls(kind=SubjectKind.AGENT, id=id)

    @classmethod
    def service(cls, id: str) -> Subject:
        """A machine identity acting for an organisation."""
        return cls(kind=SubjectKind.SERVICE, id=id)

    @classmethod
    def worker(cls, id: str) -> Subject:
        """A process that executes work."""
        return cls(kind=SubjectKind.WORKER, id=id)

    @classmethod
    def workload(cls, id: str) -> Subject:
        """A workload acting on its own behalf (e.g. submitting child work)."""
        return cls(kind=SubjectKind.WORKLOAD, id=id)

    @classmethod
    def connection(cls, id: str) -> Subject:
        """An external system reached through a connection."""
        return cls(kind=SubjectKind.CONNECTION, id=id)

    def __post_init__(self) -> None:
        # Constructed with a kind's value ("human"), as JSON spells it: made the member.
        if type(self.kind) is not SubjectKind:
            msgspec.structs.force_setattr(self, "kind", SubjectKind(self.kind))

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.id}"


SubjectSet = Annotated[
    frozenset[Subject],
    BeforeValidator(as_frozenset),
    PlainSerializer(sorted_list, return_type=list[Subject]),
]
"""A set of subjects: accepts any iterable, compares as a set, serializes sorted."""
