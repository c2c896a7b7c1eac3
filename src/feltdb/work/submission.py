"""A submission: what a requester asks to admit, defined once for every entry point.

A :class:`Submission` is a :class:`~feltdb.work.models.CreateWorkload` without the fields
the authority supplies: the tenant, the application, the requester and its grant come from
the caller's verified credential (a server's bearer token, a local client's subject), and
``created_at`` from the authority's clock. The server declares its request body with it,
the HTTP client sends it, the command line builds it, and :func:`admission_request` makes
the ``CreateWorkload`` the store admits. Its rules are ``CreateWorkload``'s: one model.

A submission needs only ``definition_id`` and ``input``: the other fields ``CreateWorkload``
requires have the same defaults on every path (:data:`SUBMISSION_DEFAULTS`; the idempotency
key a new random one, so a submission without one is never a replay).
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from pydantic import create_model
from pydantic.fields import FieldInfo

from feltdb.auth import SignedGrant, Subject
from feltdb.work.models import CreateWorkload, Request

SUPPLIED_BY_THE_AUTHORITY = (
    "tenant_id",
    "application_id",
    "requested_by",
    "authorization_snapshot",
    "created_at",
)
"""``CreateWorkload`` fields a submission never carries: the credential's and the clock's."""

SUBMISSION_DEFAULTS: Final[dict[str, Any]] = {
    "environment": "production",
    "definition_revision": "1",
    "trigger": "api",
    "capability_snapshot": [],
}
"""What a submission that leaves these out asks for (``CreateWorkload`` requires them)."""

RANDOM_KEY: Final = "idempotency_key"
"""The field a submission may leave out for a new random key."""


def _defaulted(name: str, info: FieldInfo) -> FieldInfo:
    """``info``, with the submission's default for ``name`` if it has one."""
    if name in SUBMISSION_DEFAULTS:
        return FieldInfo.merge_field_infos(info, default=SUBMISSION_DEFAULTS[name])
    if name == RANDOM_KEY:
        return FieldInfo.merge_field_infos(info, default_factory=new_idempotency_key)
    return info


def new_idempotency_key() -> str:
    """A key no other submission has (a random UUID)."""
    return str(uuid.uuid4())


Submission: type[Request] = create_model(
    "Submission",
    __base__=Request,
    __doc__="A CreateWorkload without the fields the authority supplies (tenant,"
    " application, requester, authorization snapshot, created_at); only definition_id and"
    " input are required (environment production, definition_revision 1, trigger api, no"
    " capabilities, a new random idempotency key).",
    **{
        name: (info.annotation, _defaulted(name, info))
        for name, info in CreateWorkload.model_fields.items()
        if name not in SUPPLIED_BY_THE_AUTHORITY
    },
)  # type: ignore[call-overload]
"""The submission model (built from ``CreateWorkload``'s own fields, so the two never
drift). ``Submission.parse(body)`` refuses a bad one ``WORKLOAD_INVALID``, naming fields."""


def submission_fields(submission: Request) -> dict[str, Any]:
    """The fields the submitter gave (as JSON), so ``CreateWorkload``'s defaults stand for
    the rest.
    """
    return submission.model_dump(mode="json", exclude_unset=True)


def admission_request(
    submission: Request | dict[str, Any],
    *,
    tenant_id: str,
    application_id: str,
    requested_by: Subject,
    authorization_snapshot: SignedGrant,
    created_at: int,
) -> CreateWorkload:
    """The request to admit ``submission`` (a :data:`Submission`, or its fields as a dict)
    for ``requested_by`` in ``tenant_id``'s ``application_id`` under
    ``authorization_snapshot``, at ``created_at``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming each bad field (a dict is validated
            here; so is a field of the authority's found in it).
    """
    fields = submission if isinstance(submission, dict) else submission_fields(submission)
    request: CreateWorkload = CreateWorkload.parse(
        {
            **SUBMISSION_DEFAULTS,
            RANDOM_KEY: new_idempotency_key(),
            **fields,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "requested_by": requested_by,
            "authorization_snapshot": authorization_snapshot,
            "created_at": created_at,
        }
    )
    return request
