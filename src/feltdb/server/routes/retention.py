"""The retention route: an operator prunes its application's finished work, or asks what
a pass would prune (``POST /v1/retention/prune``, ``workload:operate`` over every workload
of the application; :mod:`feltdb.work.retention_authority`).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; the route's ``summary`` says what it does.
"""

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from feltdb.fields import MAX_ID_CHARS
from feltdb.server.fields import WHITESPACE, Identifier
from feltdb.server.openapi import AUTH
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Now
from feltdb.work.pruning import MAX_PRUNE_BATCH, PRUNE_BATCH
from feltdb.work.retention import MAX_POLICY_ITEMS, policy_of
from feltdb.work.retention_authority import prune_as

router = APIRouter(prefix=PREFIX)

AGE = "(never|[0-9]{1,10}[dhms])"
"""An age as :func:`~feltdb.work.retention.parse_age` reads it."""
ITEM = (
    f"^(defaults|([^\\u0000]*[^\\u0000{WHITESPACE}][^\\u0000]*:)?"
    f"(SUCCEEDED|CANCELLED|REJECTED|DEAD_LETTER|finished)={AGE})$"
)
"""A ``--retain`` item as :func:`~feltdb.work.retention.parse_policy` reads it (its
definition, before the last ``:``, an identifier; the whole at most an identifier long)."""
RetainItem = Annotated[str, Field(max_length=MAX_ID_CHARS, pattern=ITEM)]


class PruneBody(BaseModel):
    """``POST /v1/retention/prune``: the policy of this pass, its bound, and whether only
    to say what it would prune.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    retain: list[RetainItem] = Field(
        default_factory=list,
        max_length=MAX_POLICY_ITEMS,
        description="`[DEFINITION:]STATE=AGE` items over the default ages (SUCCEEDED, "
        "CANCELLED, REJECTED 30d; DEAD_LETTER 90d); STATE may be `finished`, AGE `30d`, "
        "`12h`, `45m`, `90s` or `never`.",
    )
    older_than: str | None = Field(
        default=None, pattern=f"^{AGE}$", description="One age for every finished state (`7d`)."
    )
    definition: Identifier | None = Field(default=None, description="Only this definition's.")
    limit: int = Field(default=PRUNE_BATCH, ge=1, le=MAX_PRUNE_BATCH)
    dry_run: bool = Field(default=False, description="Only say what the pass would prune.")


class PruneAnswer(BaseModel):
    """What a pass pruned (or, ``dry_run``, would): each workload's id, state, definition,
    ``updated_at``, version and revision; ``changed``: due work left because it changed
    since it was read; ``more``: the pass stopped at its limit; ``reclaimed_pages`` and
    ``reclaimed_bytes``: the store's free space the pass then returned to the file system
    (SQLite; 0 on PostgreSQL), and ``free_pages_left`` what it still could.
    """

    pruned: list[dict[str, Any]]
    count: int
    changed: int
    dry_run: bool
    more: bool
    reclaimed_pages: int
    reclaimed_bytes: int
    free_pages_left: int


@router.post(
    "/retention/prune",
    summary="Prune (or list) finished work past its retention age",
    responses=declared(PruneAnswer, *AUTH, 413, 422),
    description="One bounded pass over the caller's application (and its grant's "
    "constraints): each deletion guarded by the version read and logged (audit kind "
    "`workload.pruned`). Needs `workload:operate` over every workload of the application.",
)
def prune(acting: Acting, now: Now, body: PruneBody | None = None) -> JSONResponse:  # noqa: D103
    asked = body if body is not None else PruneBody()
    policy = policy_of(asked.retain, asked.older_than, asked.definition)
    report = prune_as(acting, policy, now, limit=asked.limit, dry_run=asked.dry_run)
    return JSONResponse(report.to_json())
