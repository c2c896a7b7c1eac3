"""Authorization types: subjects, grants, and their signatures."""

from feltdb.auth.grants import (
    Grant,
    GrantConstraints,
    GrantStatus,
    ResourceScope,
    ResourceScopeKind,
    SignedGrant,
)
from feltdb.auth.signing import GrantSigner
from feltdb.auth.subjects import Subject, SubjectKind

__all__ = [
    "Grant",
    "GrantConstraints",
    "GrantSigner",
    "GrantStatus",
    "ResourceScope",
    "ResourceScopeKind",
    "SignedGrant",
    "Subject",
    "SubjectKind",
]
