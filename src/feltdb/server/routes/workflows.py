"""Workflows' routes: submit one, read its run, cancel it (:mod:`feltdb.work.workflow_access`).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; each route's ``summary`` says what it does.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from feltdb.errors import WorkloadError
from feltdb.fields import MAX_ID_CHARS
from feltdb.records.workflow import WorkflowRun
from feltdb.server.bodies import EmptyBody
from feltdb.server.fields import NOT_BLANK
from feltdb.server.openapi import AUTH, SUBMISSION_SCHEMA, WITH_BODY, inline_defs
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Auth, Now, State
from feltdb.server.routes.requesters import admission
from feltdb.work import workflow_access
from feltdb.work.models import invalid_input
from feltdb.work.workflow_graph import (
    MAX_WORKFLOW_NODES,
    WorkflowStep,
    node_fields,
    node_refusal,
)

router = APIRouter(prefix=PREFIX)

Name = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)]


class WorkflowNodeBody(BaseModel):
    """One node: its name in the workflow, the nodes it runs after, its submission."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Name
    after: list[Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS + 32)]] = Field(
        default_factory=list,
        max_length=MAX_WORKFLOW_NODES,
        description="Names of nodes of this workflow it runs after: `NAME` once that one"
        " SUCCEEDED, `NAME:STATE` once it rests in STATE (CANCELLED, DEAD_LETTER…).",
    )
    submission: dict[str, Any] = Field(
        json_schema_extra=SUBMISSION_SCHEMA,
        description="The node's workload, as the body of `POST /v1/workloads`.",
    )


class WorkflowBody(BaseModel):
    """``POST /v1/workflows``: a workflow's key and nodes."""

    model_config = ConfigDict(extra="forbid", strict=True)

    key: Name = Field(description="Your key for it: the same key and nodes again is a replay.")
    nodes: list[WorkflowNodeBody] = Field(min_length=1, max_length=MAX_WORKFLOW_NODES)


WORKFLOW_SCHEMA = inline_defs(WorkflowBody.model_json_schema())
"""The declared body of ``POST /v1/workflows``: read as a dict and parsed after the caller
is authorized (a caller that may not submit learns nothing of its body's shape)."""


WorkflowId = Annotated[
    str,
    Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK, description="The workflow"),
]


def _answer(run: WorkflowRun, status: int = 200) -> JSONResponse:
    return JSONResponse(run.to_json(), status_code=status)


@router.post(
    "/workflows",
    status_code=201,
    summary="Submit workloads with dependencies between them, whole (200 on a replay)",
    responses={
        **declared(WorkflowRun, *AUTH, 409, 413, 422, 429, status=201),
        200: {"model": WorkflowRun, "description": "A replay: the workflow already submitted"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": WORKFLOW_SCHEMA}},
        }
    },
)
def submit(  # noqa: D103
    caller: Auth,
    acting: Acting,
    state: State,
    now: Now,
    sent: Annotated[dict[str, Any], Body()],
) -> JSONResponse:
    acting.as_requester()
    try:
        body = WorkflowBody.model_validate(sent)
    except ValidationError as error:
        raise invalid_input("WorkflowBody", error) from None
    steps = []
    for node in body.nodes:
        try:
            fields = node_fields(body.key, node.name, node.submission)
            request = admission(caller, state, now, fields)
        except WorkloadError as refusal:
            raise node_refusal(node.name, refusal) from None
        steps.append(WorkflowStep(node.name, request, node.after))
    run, created = workflow_access.submit(acting, body.key, steps)
    return _answer(run, 201 if created else 200)


@router.get(
    "/workflows/{workflow_id}",
    summary="A workflow's run: each node's state, and the run's",
    responses=declared(WorkflowRun, *AUTH, 404, 422),
)
def read(acting: Acting, workflow_id: WorkflowId) -> JSONResponse:  # noqa: D103
    return _answer(workflow_access.run(acting, workflow_id))


@router.post(
    "/workflows/{workflow_id}/cancel",
    summary="Cancel every node of a run not yet at rest",
    responses=declared(WorkflowRun, *WITH_BODY),
)
def cancel(  # noqa: D103
    acting: Acting, now: Now, workflow_id: WorkflowId, body: EmptyBody | None = None
) -> JSONResponse:
    return _answer(workflow_access.cancel(acting, workflow_id, now))
