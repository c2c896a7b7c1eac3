"""Authorization types: subjects, grants, their signatures, bearer tokens and the policy.

Each name is imported from its module when first used (as ``feltdb``'s are), so that a
module of this package that imports nothing heavy (:mod:`feltdb.auth.capabilities`) costs
only itself: the command line declares its commands with it.
"""

import typing as _typing

import feltdb.lazy as _lazy

if _typing.TYPE_CHECKING:
    from feltdb.auth.capabilities import (
        ALL_CAPABILITIES,
        APPROVE,
        AUDIT,
        CANCEL,
        CLAIM,
        OPERATE,
        READ,
        REVOKE,
        SUBMIT,
    )
    from feltdb.auth.grants import (
        Grant,
        GrantConstraints,
        GrantStatus,
        ResourceScope,
        ResourceScopeKind,
        SignedGrant,
    )
    from feltdb.auth.policy import authorize, workload_uri
    from feltdb.auth.signing import GrantSigner
    from feltdb.auth.subjects import Subject, SubjectKind
    from feltdb.auth.tokens import TOKEN_PREFIX, Keyring, decode_token, encode_token

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("ALL_CAPABILITIES", "APPROVE", "AUDIT", "CANCEL", "CLAIM", "OPERATE", "READ"),
        "feltdb.auth.capabilities",
    ),
    **dict.fromkeys(("REVOKE", "SUBMIT"), "feltdb.auth.capabilities"),
    **dict.fromkeys(
        ("Grant", "GrantConstraints", "GrantStatus", "ResourceScope", "ResourceScopeKind"),
        "feltdb.auth.grants",
    ),
    "SignedGrant": "feltdb.auth.grants",
    "authorize": "feltdb.auth.policy",
    "workload_uri": "feltdb.auth.policy",
    "GrantSigner": "feltdb.auth.signing",
    "Subject": "feltdb.auth.subjects",
    "SubjectKind": "feltdb.auth.subjects",
    **dict.fromkeys(
        ("TOKEN_PREFIX", "Keyring", "decode_token", "encode_token"), "feltdb.auth.tokens"
    ),
}
"""Each public name and the module that defines it."""

__all__ = [
    # capabilities
    "ALL_CAPABILITIES",
    "APPROVE",
    "AUDIT",
    "CANCEL",
    "CLAIM",
    "OPERATE",
    "READ",
    "REVOKE",
    "SUBMIT",
    # tokens
    "TOKEN_PREFIX",
    # types
    "Grant",
    "GrantConstraints",
    "GrantSigner",
    "GrantStatus",
    "Keyring",
    "ResourceScope",
    "ResourceScopeKind",
    "SignedGrant",
    "Subject",
    "SubjectKind",
    # functions
    "authorize",
    "decode_token",
    "encode_token",
    "workload_uri",
]


__getattr__, __dir__ = _lazy.exported(__name__, _EXPORTS, globals())
