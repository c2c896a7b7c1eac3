"""Authorization types: subjects, grants, their signatures, bearer tokens and the policy."""

from feltdb.auth.grants import (
    Grant,
    GrantConstraints,
    GrantStatus,
    ResourceScope,
    ResourceScopeKind,
    SignedGrant,
)
from feltdb.auth.policy import (
    ALL_CAPABILITIES,
    APPROVE,
    AUDIT,
    CANCEL,
    CLAIM,
    OPERATE,
    READ,
    REVOKE,
    SUBMIT,
    authorize,
    workload_uri,
)
from feltdb.auth.signing import GrantSigner
from feltdb.auth.subjects import Subject, SubjectKind
from feltdb.auth.tokens import TOKEN_PREFIX, Keyring, decode_token, encode_token

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
