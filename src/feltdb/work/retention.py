"""Retention: how long finished work is kept before a prune pass deletes it.

A :class:`RetentionPolicy` gives an age per finished state (:data:`DEFAULT_AGES`: 30 days
for ``SUCCEEDED``, ``CANCELLED`` and ``REJECTED``; 90 days for ``DEAD_LETTER``, which an
operator may still retry), and per definition ages that replace them for that definition's
work. An age is measured from the workload's ``updated_at`` (when it finished, or when an
operator last touched it); ``None`` keeps that work for ever.

The policy is not stored: it is what the caller passes (``store.retention.prune(policy)``,
``feltdb prune --older-than``, ``feltdb serve --retain``). Several servers on one store may
each be given one: every deletion is guarded by the version read, so the servers delete
each workload once, whoever runs first (:mod:`feltdb.work.pruning`).

A policy is written on the command line as ``[DEFINITION:]STATE=AGE`` items (:func:`parse_policy`):
``STATE`` one of the finished states or ``finished`` (all four), ``AGE`` a whole number of
days, hours, minutes or seconds (at most 10 digits: ``30d``, ``12h``, ``45m``, ``90s``) or
``never``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_SAFE_INTEGER
from feltdb.work import inputs
from feltdb.work.states import WorkloadState

__all__ = [
    "DEFAULT_AGES",
    "FINISHED_STATES",
    "MAX_POLICY_ITEMS",
    "RetentionPolicy",
    "age_text",
    "parse_age",
    "parse_policy",
    "policy_of",
]

DAY: Final = 86_400
FINISHED_STATES: Final = (
    WorkloadState.SUCCEEDED,
    WorkloadState.CANCELLED,
    WorkloadState.REJECTED,
    WorkloadState.DEAD_LETTER,
)
"""The states retention prunes, in the order a pass reads them."""

DEFAULT_AGES: Final[Mapping[WorkloadState, int | None]] = MappingProxyType(
    {
        WorkloadState.SUCCEEDED: 30 * DAY,
        WorkloadState.CANCELLED: 30 * DAY,
        WorkloadState.REJECTED: 30 * DAY,
        WorkloadState.DEAD_LETTER: 90 * DAY,
    }
)
"""The age after which finished work is pruned, per state, unless a policy says otherwise."""

MAX_POLICY_ITEMS: Final = 256
"""The most ``[DEFINITION:]STATE=AGE`` items one policy holds."""

_UNITS: Final = {"d": DAY, "h": 3600, "m": 60, "s": 1}
_AGE: Final = re.compile(r"([0-9]{1,10})([dhms])")


def parse_age(text: str) -> int | None:
    """The seconds an age written ``30d``, ``12h``, ``45m`` or ``90s`` stands for; ``None``
    for ``never``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for anything else (or an age past 2**53 s).
    """
    if text == "never":
        return None
    found = _AGE.fullmatch(text)
    seconds = int(found[1]) * _UNITS[found[2]] if found is not None else -1
    if not 0 <= seconds <= MAX_SAFE_INTEGER:
        raise inputs.invalid(
            "age", f"{text!r} is not an age: write a number of d, h, m or s (30d), or never"
        )
    return seconds


def age_text(seconds: int | None) -> str:
    """An age as :func:`parse_age` reads it: the largest whole unit (``30d``), or ``never``."""
    if seconds is None:
        return "never"
    for unit, size in _UNITS.items():
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """The age of finished work past which it is pruned: ``ages`` per state, and per
    definition ``definitions`` ages that replace them (a state a definition does not name
    keeps the global age). ``None``: kept for ever.
    """

    ages: Mapping[WorkloadState, int | None] = field(default_factory=lambda: dict(DEFAULT_AGES))
    definitions: Mapping[str, Mapping[WorkloadState, int | None]] = field(default_factory=dict)

    @classmethod
    def parse(cls, items: Iterable[str]) -> RetentionPolicy:
        """The default ages with ``[DEFINITION:]STATE=AGE`` items applied
        (:func:`parse_policy`).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming the item that is not one.
        """
        return parse_policy(items)

    def age_for(self, definition_id: str, state: WorkloadState) -> int | None:
        """The age past which ``definition_id``'s work in ``state`` is pruned (``None``: never)."""
        override = self.definitions.get(definition_id)
        if override is not None and state in override:
            return override[state]
        return self.ages.get(state)

    def shortest(self, state: WorkloadState) -> int | None:
        """The shortest age any definition's work in ``state`` is kept (``None``: all of it
        is kept for ever): a workload updated after ``now`` less this is never due.
        """
        ages = [self.ages.get(state)]
        ages += [override[state] for override in self.definitions.values() if state in override]
        kept = [age for age in ages if age is not None]
        return min(kept) if kept else None

    def only(self, definition_id: str) -> RetentionPolicy:
        """This policy for ``definition_id``'s work alone (every other definition's kept)."""
        own = {state: self.age_for(definition_id, state) for state in FINISHED_STATES}
        return RetentionPolicy(dict.fromkeys(FINISHED_STATES), {definition_id: own})

    def summary(self) -> str:
        """The policy in a line: ``SUCCEEDED 30d, …, DEAD_LETTER 90d`` (and how many
        definitions have ages of their own).
        """
        ages = ", ".join(
            f"{state.value} {age_text(self.ages.get(state))}" for state in FINISHED_STATES
        )
        own = len(self.definitions)
        return ages + (f"; {own} definition(s) with ages of their own" if own else "")

    def describe(self) -> dict[str, object]:
        """The policy as JSON: ``{"ages": {STATE: AGE}, "definitions": {ID: {STATE: AGE}}}``,
        each age as :func:`age_text` writes it.
        """
        return {
            "ages": {state.value: age_text(self.ages.get(state)) for state in FINISHED_STATES},
            "definitions": {
                definition: {state.value: age_text(age) for state, age in override.items()}
                for definition, override in sorted(self.definitions.items())
            },
        }


def parse_policy(items: Iterable[str], base: RetentionPolicy | None = None) -> RetentionPolicy:
    """``base`` (:data:`DEFAULT_AGES` by default) with each ``[DEFINITION:]STATE=AGE`` item
    applied in turn (see the module); the item ``defaults`` changes nothing.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the item that is not one, or for more
            than :data:`MAX_POLICY_ITEMS` items.
    """
    policy = base if base is not None else RetentionPolicy()
    ages = dict(policy.ages)
    definitions = {name: dict(override) for name, override in policy.definitions.items()}
    for count, item in enumerate(items, start=1):
        if count > MAX_POLICY_ITEMS:
            raise inputs.invalid("retain", f"holds more than {MAX_POLICY_ITEMS} items")
        if item == "defaults":
            continue
        scope, colon, setting = item.rpartition(":")
        name, equals, age_written = setting.partition("=")
        if not equals:
            raise inputs.invalid("retain", f"{item!r} is not [DEFINITION:]STATE=AGE")
        age = parse_age(age_written)
        target = ages if not colon else definitions.setdefault(_definition(scope), {})
        for state in _states(name, item):
            target[state] = age
    return RetentionPolicy(ages, definitions)


def _definition(text: str) -> str:
    return inputs.identifier(text, "retain")


def _states(name: str, item: str) -> tuple[WorkloadState, ...]:
    """The states ``name`` stands for in ``item`` (``finished``: every finished state)."""
    if name.lower() == "finished":
        return FINISHED_STATES
    for state in FINISHED_STATES:
        if state.value == name.upper():
            return (state,)
    raise WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"retain: {item!r} names no finished state: write SUCCEEDED, CANCELLED, REJECTED, "
        "DEAD_LETTER or finished",
        {"fields": ["retain"]},
    )


def policy_of(
    retain: Iterable[str] = (), older_than: str | None = None, definition: str | None = None
) -> RetentionPolicy:
    """The policy a command line or a request asks for: :data:`DEFAULT_AGES` with the
    ``retain`` items applied (:func:`parse_policy`); then ``older_than``, when given, as
    the one age of every finished state of every definition; then, with ``definition``,
    that definition's work alone (:meth:`RetentionPolicy.only`).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming what is not one.
    """
    policy = parse_policy(retain)
    if older_than is not None:
        policy = RetentionPolicy(dict.fromkeys(FINISHED_STATES, parse_age(older_than)))
    if definition is not None:
        policy = policy.only(_definition(definition))
    return policy
