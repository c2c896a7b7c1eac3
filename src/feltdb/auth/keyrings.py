"""Where a keyring comes from: the environment, or a file created on first use.

A keyring holds the signing keys of one authority (see :class:`~feltdb.auth.tokens.Keyring`).
A server, and an operator acting on its store directly (``feltdb … --db``), find it the
same way: the JSON in :data:`KEYRING_ENV` when set, else the file beside the store,
created with a first administrator token when there is none.
"""

from __future__ import annotations

import os
from pathlib import Path

from feltdb.auth.grants import Grant, new_grant_id
from feltdb.auth.policy import ALL_CAPABILITIES, application_grant
from feltdb.auth.subjects import Subject
from feltdb.auth.tokens import Keyring

KEYRING_ENV = "FELTDB_KEYRING"
"""The environment variable that may hold the keyring (its JSON)."""
KEYRING_FILE = "feltdb-keyring.json"
"""The keyring's file name, beside an embedded store's file."""
ADMIN_TOKEN_LIFETIME_S = 30 * 24 * 3600
"""How long the first administrator token lasts: 30 days."""


def admin_grant(now: int) -> Grant:
    """The development admin grant of a first start: every capability on every workload
    of tenant ``default``, application ``default``, for 30 days.
    """
    return application_grant(
        Subject.human("admin"),
        "default",
        "default",
        ALL_CAPABILITIES,
        issued_at=now,
        expires_at=now + ADMIN_TOKEN_LIFETIME_S,
        grant_id=new_grant_id(),
    )


def keyring_path_beside(store_file: Path | None) -> Path:
    """Where the keyring of a store lives by default: :data:`KEYRING_FILE` beside an
    embedded store's file, or in the current directory for a store with no file
    (PostgreSQL).
    """
    return (store_file.parent if store_file is not None else Path()) / KEYRING_FILE


def environment_keyring() -> Keyring | None:
    """The keyring :data:`KEYRING_ENV` holds, or ``None`` when it is not set."""
    from_env = os.environ.get(KEYRING_ENV)
    return Keyring.from_json(from_env) if from_env else None


def load_or_create_keyring(path: Path, now: int) -> tuple[Keyring, str | None]:
    """The keyring at ``path``; when there is none, a new one saved there, with an admin
    token signed by it (see :func:`admin_grant`), returned as the second item. Of two
    processes creating it at once, one writes it and the other reads what it wrote.
    """
    if path.exists():
        return Keyring.load(path), None
    keyring = Keyring.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        keyring.save(path, exclusive=True)
    except FileExistsError:
        return Keyring.load(path), None
    return keyring, keyring.sign(admin_grant(now))
