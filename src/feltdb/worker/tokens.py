"""The token a worker works for a server under, kept: when it expires is said at start and
again shortly before, and a token file is re-read when it changes, so that a token can be
rotated without a restart (a worker whose token expires is refused everything, and exits).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from feltdb.auth.capabilities import CLAIM
from feltdb.auth.grants import Grant
from feltdb.auth.policy import worker_name
from feltdb.auth.subjects import SubjectKind
from feltdb.auth.tokens import MAX_TOKEN_CHARS, decode_token
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import instant_text

log = logging.getLogger("feltdb.worker")

NOTICE_SHARE = 0.1
"""The share of its lifetime a token has left when the worker warns again that it expires."""
NOTICE_MIN_S = 300
"""The least notice of an expiry, in seconds: time enough for somebody to rotate the token."""
FILE_CHECK_S = 1.0
"""How often, at most, a token file is looked at for a change (one ``stat``)."""

FileStamp = tuple[int, int, int] | None
"""What tells a changed token file: its inode, size and modification time (``None``: it
cannot be looked at). The inode, because a file replaced by a rename may keep the rest."""
_UNREAD: FileStamp = (-1, -1, -1)
"""No file's stamp: the first look at a token file reads it (it may have changed since the
token in use was read from it)."""


_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def notice_at(grant: Grant) -> float:
    """When the worker holding ``grant`` is warned again that it expires: once a tenth of
    its lifetime, or five minutes, remain, whichever is more.
    """
    lifetime = grant.expires_at - grant.issued_at
    return grant.expires_at - max(NOTICE_SHARE * lifetime, NOTICE_MIN_S)


def until(at: float, now: float) -> str:
    """How far ``at`` is from ``now``, in its two largest units: ``in 29d 23h``, ``in 4m
    10s``, ``3s ago``.
    """
    seconds = round(at - now)
    left = abs(seconds)
    first = next(i for i, (_, length) in enumerate(_UNITS) if left >= length or length == 1)
    parts = []
    for unit, length in _UNITS[first : first + 2]:
        parts.append(f"{left // length}{unit}")
        left %= length
    span = " ".join(parts)
    return f"{span} ago" if seconds < 0 else f"in {span}"


def read_token(path: Path) -> str:
    """The token the file at ``path`` holds (surrounding whitespace removed), decoded to
    check that it is one (not verified: the server does that).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a file that cannot be read;
            ``WORKLOAD_UNAUTHORIZED`` for one that holds no token; each naming the file.
    """
    try:
        with path.open("rb") as file:
            # Bounded: a path to something endless (a device, a pipe) costs one token's worth.
            text = file.read(MAX_TOKEN_CHARS + 2).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, f"cannot read the token file {path}: {reason}"
        ) from None
    token = text.strip()
    try:
        decode_token(token)
    except WorkloadError as error:
        raise WorkloadError(error.code, f"the token file {path}: {error.message}") from None
    return token


def _stamp(path: Path) -> FileStamp:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def _refusal(held: Grant, new: Grant, now: float) -> str | None:
    """Why a worker holding ``held`` does not take a token of ``new`` (``None``: it does).
    Another subject, tenant or application would find the work it holds refused.
    """
    if (new.subject, new.tenant_id, new.application_id) != (
        held.subject,
        held.tenant_id,
        held.application_id,
    ):
        return (
            f"it is {new.subject}'s in {new.tenant_id}/{new.application_id}, not "
            f"{held.subject}'s in {held.tenant_id}/{held.application_id}"
        )
    if new.expires_at <= now:
        return f"it expired at {instant_text(new.expires_at)}"
    return None


def _mint_command(grant: Grant) -> str:
    """The command that mints a token like ``grant``: of its subject, tenant, application
    and capabilities (not its narrowed resources, environments or definitions).
    """
    subject = grant.subject
    if subject.kind is SubjectKind.WORKER:  # --worker implies workload:claim and default
        words, capabilities = [f"--worker {subject.id}"], grant.capabilities - {CLAIM}
        elsewhere = (grant.tenant_id, grant.application_id) != ("default", "default")
    else:
        words, capabilities, elsewhere = [f"--subject {subject}"], grant.capabilities, True
    if elsewhere:
        words.append(f"--tenant {grant.tenant_id} --application {grant.application_id}")
    words += [f"--capability {capability}" for capability in sorted(capabilities)]
    return " ".join(["feltdb grant issue", *words])


class TokenKeeper:
    """Keeps the token of a worker's client of a server: says when it expires, and takes a
    rotated one from its file.

    Args:
        token: the token the client sends now.
        path: the file the token came from, re-read when it changes (``None``: none).
        use: what makes the client send another token (``Client.use_token``).
        clock: unix seconds, for the tests.
    """

    def __init__(
        self,
        token: str,
        path: Path | None,
        use: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token = token
        self.grant = decode_token(token).grant
        self.path = path
        self._use = use
        self._clock = clock
        self._seen = _UNREAD
        self._checked = clock()
        self._warned = False

    def announce(self) -> None:
        """Warn, on one line, when the token expires and how to rotate it (at start).
        Inside its notice already (:func:`notice_at`), :meth:`tend` does not warn again.
        """
        now = self._clock()
        self._warned = now >= notice_at(self.grant)
        self._warn(now)

    def tend(self) -> None:
        """Before each claim pass: take a new token from the file if it changed (looked at
        once a :data:`FILE_CHECK_S` at most), and warn once when the expiry is near.
        Never raises: a file that holds no usable token is said once, and the token kept.
        """
        now = self._clock()
        if self.path is not None and now - self._checked >= FILE_CHECK_S:
            self._checked = now
            self._reread(self.path, now)
        if not self._warned and now >= notice_at(self.grant):
            self._warned = True
            self._warn(now)

    def _warn(self, now: float) -> None:
        expires = self.grant.expires_at
        if self.path is not None:
            how = f"to rotate it, write a new one ({_mint_command(self.grant)}) to {self.path}"
        else:
            how = (
                "to rotate it without a restart, give it as a file (--token-file, re-read "
                f"when it changes) and write a new one ({_mint_command(self.grant)}) there"
            )
        log.warning(
            "worker %s: its token %s at %s (%s), and the server refuses it from then on; %s",
            worker_name(self.grant.subject), "expired" if expires <= now else "expires",
            instant_text(expires), until(expires, now), how,
        )  # fmt: skip

    def _reread(self, path: Path, now: float) -> None:
        stamp = _stamp(path)
        if stamp == self._seen:
            return
        self._seen = stamp  # so a file that holds no usable token is said once
        name = worker_name(self.grant.subject)
        try:
            token = read_token(path)
        except WorkloadError as error:
            log.warning("worker %s: keeps its token: %s", name, error.message)
            return
        if token == self.token:
            return
        grant = decode_token(token).grant
        refused = _refusal(self.grant, grant, now)
        if refused is not None:
            log.warning("worker %s: keeps its token, not the one in %s: %s", name, path, refused)
            return
        self.token, self.grant, self._warned = token, grant, False
        self._use(token)
        log.info(
            "worker %s: took the new token in %s; it expires at %s (%s)",
            name, path, instant_text(grant.expires_at), until(grant.expires_at, now),
        )  # fmt: skip
