"""A submission: what a requester asks to admit, defined once for every entry point.

A :class:`Submission` is a :class:`~feltdb.work.models.CreateWorkload` without the fields
the authority supplies: the tenant, the application, the requester and its grant come from
the caller's verified credential (a server's bearer token, a local client's subject), and
``created_at`` from the authority's clock. The server declares its request body with it,
the HTTP client sends it, the command line builds it, and :func:`admission_request` makes
the ``CreateWorkload`` the store admits. Its rules are ``CreateWorkload``'s: one model.
"""

from __future__ import annotations

from typing import Any

from pydantic import create_model

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

Submission: type[Request] = create_model(
    "Submission",
    __base__=Request,
    __doc__="A CreateWorkload without the fields the authority supplies (tenant,"
    " application, requester, authorization snapshot, created_at).",
    **{
        name: (info.annotation, info)
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
            **fields,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "requested_by": requested_by,
            "authorization_snapshot": authorization_snapshot,
            "created_at": created_at,
        }
    )
    return request
