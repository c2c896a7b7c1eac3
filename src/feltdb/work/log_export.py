"""An export of the log: the entries up to a sealed revision, with their links, as a JSON
Lines file that proves itself against the chain (:mod:`feltdb.work.log_pruning` writes one
before it deletes what it holds).

The file's first line is its header: ``{"feltdb_audit_export": 1, "after_revision",
"after_link", "through_revision", "through_link", "entries", "exported_at"}``, the link
before its first entry (:data:`~feltdb.storage.audit_chain.GENESIS` for the log's start)
and the link of its last. Each later line is one entry: ``{"revision",
"previous_revision", "digest", "link", "entry"}``, ``entry`` holding every field the
entry's digest covers (:class:`~feltdb.storage.chain_log.LogEntry`).

:func:`check_export` recomputes every digest and link from the header's ``after_link``:
an entry edited, dropped, added or reordered in the file breaks it, as in the log. Kept
beside the chain's head (an anchor, or the pruned log's link at ``through_revision``), the
file proves the history it holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, TypeGuard

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.audit_chain import GENESIS, entry_digest, next_link
from feltdb.storage.base import Database, storage_failure
from feltdb.storage.chain_log import ChainLink, LogEntry
from feltdb.work import inputs

__all__ = ["EXPORT_FORMAT", "ExportSummary", "check_export", "reserved", "write_export"]

EXPORT_FORMAT: Final = 1
"""The header's ``feltdb_audit_export``: the format this release writes and reads."""
PAGE: Final = 1000
"""Links (and their entries) read per statement while exporting."""
MAX_LINE: Final = 64 * 1024 * 1024
"""The longest line :func:`check_export` reads (an entry's line is far shorter: a commit
writes at most a few thousand rows), so a hostile file cannot make it hold more."""


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export holds: its entries' range, its first and last links, and the file's
    digest.
    """

    after_revision: int
    after_link: str
    """The link before its first entry (:data:`GENESIS` from the log's start)."""
    chained_from: int
    """The revision of that link: its first entry's ``previous_revision`` (``after_revision``
    if it holds none)."""
    through_revision: int
    last_revision: int
    """The revision of its last entry (``after_revision`` if it holds none)."""
    through_link: str
    """The link of its last entry (``after_link`` if it holds none)."""
    entries: int
    sha256: str
    """SHA-256 (hex) of the file's bytes, to note beside it."""
    size: int
    """The file's size, in bytes."""

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON."""
        return asdict(self)


@contextmanager
def reserved(path: Path) -> Iterator[Path]:
    """A new, empty file of a name of its own beside ``path``, to write ``path``'s export
    into (:func:`write_export`); removed on the way out (once written, the export has its
    own name). Made first, so that a path that cannot be written is refused before anything
    else is done.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` if ``path`` exists, or its directory does not,
            or is not one that may be written; ``WORKLOAD_STORAGE_FAILURE`` otherwise.
    """
    if path.exists():
        raise inputs.invalid("export", f"{path} exists: an export is never overwritten")
    partial = path.with_name(f"{path.name}.{secrets.token_hex(6)}.partial")
    try:
        open(partial, "xb").close()
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as error:
        raise inputs.invalid("export", f"{path} cannot be made: {error.strerror}") from error
    except OSError as error:
        raise storage_failure(f"the export {path} cannot be written: {error}") from error
    try:
        yield partial
    finally:
        partial.unlink(missing_ok=True)


def write_export(
    db: Database, partial: Path, path: Path, after: tuple[int, str], through: int, now: int
) -> ExportSummary:
    """Write the sealed entries after ``after`` (a revision and its link) up to revision
    ``through``, with their links, to ``partial`` (:func:`reserved`), a page at a time
    (memory bounded however many), each checked against its link; synced, then given the
    name ``path`` (a crash leaves no partial export there).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` if ``path`` exists (an export is never
            overwritten); ``WORKLOAD_CONFLICT`` for an entry that is not the one sealed
            (altered since the check); ``WORKLOAD_STORAGE_FAILURE`` if a sealed entry there
            is missing from the log, or the file cannot be written.
    """
    digest, count = hashlib.sha256(), 0
    last, revision, chained_from = after[1], after[0], after[0]
    header = {
        "feltdb_audit_export": EXPORT_FORMAT,
        "after_revision": after[0],
        "after_link": after[1],
        "through_revision": through,
        "exported_at": now,
    }
    try:
        with open(partial, "wb") as file:

            def write(line: dict[str, Any]) -> None:
                encoded = _encoded(line)
                digest.update(encoded)
                file.write(encoded)

            write(header)
            for line in _lines(db, after[0], through):
                if not count:
                    chained_from = line["previous_revision"]
                write(line)
                count, last, revision = count + 1, line["link"], line["revision"]
            write({"end": True, "entries": count, "through_link": last})
            file.flush()
            os.fsync(file.fileno())
        os.link(partial, path)  # fails if the name was taken meanwhile: never overwrites
        _sync_directory(path.parent)
    except FileExistsError as error:
        raise inputs.invalid("export", f"{path} exists: an export is never overwritten") from error
    except OSError as error:
        raise storage_failure(f"the export {path} cannot be written: {error}") from error
    size = path.stat().st_size
    return ExportSummary(
        after[0], after[1], chained_from, through, revision, last, count, digest.hexdigest(), size
    )


def _lines(db: Database, after: int, through: int) -> Iterator[dict[str, Any]]:
    """Each sealed entry after ``after`` up to ``through``, with its link, in order; each
    entry checked against the digest its link sealed.
    """
    while links := db.chain_links_between(after, through, PAGE):
        entries = db.chain_entries_at([link.commit_revision for link in links])
        for link in links:
            entry = entries.get(link.commit_revision)
            if entry is None:
                raise storage_failure(
                    f"the log has no entry at revision {link.commit_revision}, sealed in "
                    "the audit chain: nothing was exported"
                )
            if entry_digest(entry) != link.digest:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_CONFLICT,
                    f"the log's entry at revision {link.commit_revision} is not the one "
                    "sealed there: it was altered since the check, and nothing was exported",
                )
            yield {**_link_fields(link), "entry": asdict(entry)}
        after = links[-1].commit_revision


def _link_fields(link: ChainLink) -> dict[str, Any]:
    return {
        "revision": link.commit_revision,
        "previous_revision": link.previous_revision,
        "digest": link.digest,
        "link": link.link,
    }


def _encoded(line: dict[str, Any]) -> bytes:
    return (json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _sync_directory(directory: Path) -> None:
    # The new name is durable only once its directory is.
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def check_export(path: Path) -> ExportSummary:
    """Check an export: every entry's digest and link recomputed from its header's
    ``after_link`` (:data:`GENESIS` from the log's start), in increasing revision order, up
    to its end line; what it holds.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the first line that fails (an entry
            edited, dropped, added or reordered; a file cut short), or a file that is not
            an export; ``WORKLOAD_STORAGE_FAILURE`` if it cannot be read.
    """
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as file:
            check = _Check(path)
            number = 0
            while raw := file.readline(MAX_LINE + 1):
                number += 1
                if len(raw) > MAX_LINE:
                    raise check.bad(number, f"longer than {MAX_LINE:,} bytes: not an export's")
                digest.update(raw)
                size += len(raw)
                check.line(number, raw)
    except FileNotFoundError as error:
        raise inputs.invalid("export", f"no file at {path}") from error
    except OSError as error:
        raise storage_failure(f"the export {path} cannot be read: {error}") from error
    return check.summary(digest.hexdigest(), size)


class _Check:
    """An export's lines checked one by one, as :func:`check_export` reads them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.after: tuple[int, str, int] | None = None
        """The header's revision, link and ``through_revision``."""
        self.chained_from: int | None = None
        self.revision = 0
        self.link = GENESIS
        self.entries = 0
        self.ended = False

    def bad(self, number: int, what: str) -> WorkloadError:
        return inputs.invalid("export", f"{self.path}, line {number}: {what}")

    def line(self, number: int, raw: bytes) -> None:
        try:
            line = json.loads(raw)
        except (ValueError, RecursionError) as error:
            raise self.bad(number, "not JSON") from error
        if not isinstance(line, dict) or self.ended:
            raise self.bad(number, "not a line of an export here")
        if self.after is None:
            self.header(number, line)
        elif line.get("end") is True:
            if (line.get("entries"), line.get("through_link")) != (self.entries, self.link):
                raise self.bad(number, "its end does not name the entries before it")
            self.ended = True
        else:
            self.entry(number, line)

    def header(self, number: int, line: dict[str, Any]) -> None:
        if line.get("feltdb_audit_export") != EXPORT_FORMAT:
            raise self.bad(number, f"not a feltdb audit export (format {EXPORT_FORMAT})")
        after, link, through = (
            line.get(k) for k in ("after_revision", "after_link", "through_revision")
        )
        if not (_revision(after) and isinstance(link, str) and _revision(through)):
            raise self.bad(number, "a header without after_revision, after_link, through_revision")
        if after == 0 and link != GENESIS:
            raise self.bad(number, "an export from the log's start links from the chain's start")
        self.after = (after, link, through)
        self.revision, self.link = after, link

    def entry(self, number: int, line: dict[str, Any]) -> None:
        try:
            entry = LogEntry(**line["entry"])
            revision, previous = line["revision"], line["previous_revision"]
            stated = (line["digest"], line["link"])
        except (KeyError, TypeError) as error:
            raise self.bad(number, "not an entry with its link") from error
        if not (_revision(revision) and _revision(previous)) or revision != entry.commit_revision:
            raise self.bad(number, "not an entry with its link")
        if self.chained_from is None:
            self.chained_from = previous
        # The first entry's link follows the one at or before the header's revision (a
        # pruned revision need not be an entry's); each later one the entry before it.
        if previous > self.revision or (self.entries and previous != self.revision):
            raise self.bad(number, f"revision {revision} does not follow revision {self.revision}")
        if revision <= previous:
            raise self.bad(number, f"revision {revision} does not follow revision {previous}")
        found = entry_digest(entry)
        if stated != (found, next_link(self.link, revision, found)):
            raise self.bad(number, f"the entry at revision {revision} is not the one linked")
        self.revision, self.link, self.entries = revision, stated[1], self.entries + 1

    def summary(self, sha256: str, size: int) -> ExportSummary:
        if self.after is None or not self.ended:
            raise inputs.invalid("export", f"{self.path} ends before its end line: cut short")
        after, link, through = self.after
        if self.revision > through:
            raise inputs.invalid("export", f"{self.path}: entries past its through_revision")
        chained = after if self.chained_from is None else self.chained_from
        return ExportSummary(
            after, link, chained, through, self.revision, self.link, self.entries, sha256, size
        )


def _revision(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a revision as an export writes one: an integer, 0 or more."""
    return type(value) is int and value >= 0
