"""``Scope``: whose work a caller may see.

A scope is one tenant's application, optionally narrowed to some environments and some
definitions (a constrained grant's). The store's operations take it as ``scope=`` and
answer work outside it exactly as they answer missing work (``WORKLOAD_NOT_FOUND``, in the
same words), in the one read they already make: so no entry point can learn whether work
it may not see exists, and none has to read a workload twice to find out.
"""

from __future__ import annotations

from dataclasses import dataclass

from feltdb.auth.grants import Grant


@dataclass(frozen=True, slots=True)
class Scope:
    """One tenant's application, narrowed to ``environments`` and ``definitions`` unless
    they are empty (an empty set does not narrow, as in a grant's constraints).
    """

    tenant_id: str
    application_id: str
    environments: frozenset[str] = frozenset()
    definitions: frozenset[str] = frozenset()

    @classmethod
    def of_grant(cls, grant: Grant) -> Scope:
        """What ``grant`` may see: its tenant's application, within its constraints."""
        return cls(
            grant.tenant_id,
            grant.application_id,
            frozenset(grant.constraints.environments),
            frozenset(grant.constraints.definitions),
        )

    @property
    def narrowed(self) -> bool:
        """Whether this scope is narrowed to some environments or definitions."""
        return bool(self.environments or self.definitions)

    def admits_definition(self, definition_id: str) -> bool:
        """Whether this scope's definitions (if it is narrowed to some) hold ``definition_id``."""
        return not self.definitions or definition_id in self.definitions

    def admits(
        self, tenant_id: str, application_id: str, environment: str, definition_id: str
    ) -> bool:
        """Whether work of this tenant, application, environment and definition is in
        the scope.
        """
        return (
            tenant_id == self.tenant_id
            and application_id == self.application_id
            and (not self.environments or environment in self.environments)
            and self.admits_definition(definition_id)
        )
