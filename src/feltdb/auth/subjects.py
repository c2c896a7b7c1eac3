"""Subjects: who acts. Humans, agents, services, workers, workloads and connections."""

from __future__ import annotations

import enum
from functools import total_ordering
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from feltdb.fields import MAX_ID_CHARS, as_frozenset, sorted_list


class SubjectKind(enum.StrEnum):
    """The kinds of subject, as they serialize."""

    HUMAN = "human"
    AGENT = "agent"
    SERVICE = "service"
    WORKER = "worker"
    WORKLOAD = "workload"
    CONNECTION = "connection"


@total_ordering
class Subject(BaseModel):
    """An identity: a kind and an id. Hashable, ordered and equal by ``(kind, id)``.

    Serializes as ``{"kind": "human", "id": "ada"}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: SubjectKind
    id: Annotated[str, Field(max_length=MAX_ID_CHARS)]

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

    def _key(self) -> tuple[str, str]:
        return (self.kind.value, self.id)

    def __lt__(self, other: Any) -> bool:
        if not isinstance(other, Subject):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Subject):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.id}"


SubjectSet = Annotated[
    frozenset[Subject],
    BeforeValidator(as_frozenset),
    PlainSerializer(sorted_list),
]
"""A set of subjects: accepts any iterable, compares as a set, serializes sorted."""
