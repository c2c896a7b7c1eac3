"""Secret safety: plaintext secrets never enter workload state, errors or reasons."""

from __future__ import annotations

from typing import Any

from feltdb.canonical import canonical_json
from feltdb.errors import ErrorCode, WorkloadError

SECRET_KEYS = frozenset({"password", "secret", "token", "api_key", "private_key"})
"""Object keys (compared case-insensitively) whose presence marks a value as a secret."""


def sensitive_text(text: str) -> bool:
    """Whether ``text`` looks like secret material (a private key or a live API key)."""
    return "BEGIN PRIVATE KEY" in text or text.startswith(("sk-", "fdb_live_"))


def _contains_secret(value: Any) -> bool:
    if isinstance(value, dict):
        return any(
            (isinstance(key, str) and key.lower() in SECRET_KEYS) or _contains_secret(item)
            for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return any(_contains_secret(item) for item in value)
    if isinstance(value, str):
        return sensitive_text(value)
    return False


def ensure_safe(value: Any, field: str) -> None:
    """Refuse a JSON value that is not JSON or that carries secret material.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field`` when it is not JSON;
            ``WORKLOAD_SECRET_REJECTED`` when it holds a secret.
    """
    try:
        canonical_json(value)
    except ValueError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, f"{field} must be JSON: {error}", {"fields": [field]}
        ) from error
    if _contains_secret(value):
        raise WorkloadError(
            ErrorCode.WORKLOAD_SECRET_REJECTED,
            f"plaintext secrets are forbidden in workload state ({field})",
            {"fields": [field]},
        )


def ensure_safe_text(text: str, what: str) -> None:
    """Refuse free text (an error, a reason) that carries secret material.

    Raises:
        WorkloadError: ``WORKLOAD_SECRET_REJECTED``.
    """
    if sensitive_text(text):
        raise WorkloadError(
            ErrorCode.WORKLOAD_SECRET_REJECTED, f"{what} may not contain secret material"
        )
