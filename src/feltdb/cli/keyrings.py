"""Which keyring a command acting on a store directly (``--db``) signs its operator's grant
with, and saying so.

Only the commands that record a grant open one: ``submit`` (the submission keeps it),
``approve`` and ``reject`` (the decision names it). Each takes the keyring a server on that
store uses, found as ``feltdb serve`` finds its own, and says on stderr which one it
took. It never makes one where nobody asked for it (issue 24, point 13):

1. ``FELTDB_KEYRING`` (the keyring's JSON), when set, as for ``feltdb serve``;
2. else the file ``--keyring`` names, which must exist (``feltdb keys new --out PATH``
   makes one): a mistyped path would otherwise mint a keyring no server holds;
3. else ``feltdb-keyring.json`` beside a store *file*, created there when missing, where
   ``feltdb serve`` on that file creates and uses it;
4. else (a database URL: the store has no file to sit beside) a refusal. A file in the
   current directory would be a keyring no server of that database holds, and a signing
   secret left wherever the command happened to run.

``feltdb serve`` itself (:mod:`feltdb.cli.serve`) remains the one command that creates a
keyring for a database, in its working directory, because it also prints the admin token
signed by it; ``feltdb keys new`` creates one where told.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from feltdb.cli.targets import usage_error

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from feltdb.auth.tokens import Keyring

KeyringFileOption = Annotated[
    Path | None,
    typer.Option(
        "--keyring",
        help="With --db: the keyring file that signs your grant (it must exist: feltdb keys "
        "new --out PATH makes one). FELTDB_KEYRING (the keyring's JSON), when set, takes "
        "precedence, as for feltdb serve. With neither: feltdb-keyring.json beside a store "
        "file, created there when missing; a database URL needs one of the two.",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class KeyringChoice:
    """Where a command's keyring comes from: the environment (``path`` is ``None``) or the
    file at ``path``, which the command may create only when ``create`` is set.
    """

    path: Path | None
    create: bool = False


def choose_keyring(db: str, given: Path | None) -> KeyringChoice:
    """Where the keyring of a command on the store ``db`` comes from (the order is the
    module's): decided before the store is opened, so that a refusal connects to nothing
    and writes nothing.

    Raises:
        typer.Exit: (2, after saying why and how to make one) ``given`` names no file, or
            ``db`` is a database URL and neither ``given`` nor ``FELTDB_KEYRING`` names a
            keyring.
        WorkloadError: ``WORKLOAD_INVALID`` for a ``db`` URL of an unknown scheme.
    """
    from feltdb.auth.keyrings import KEYRING_ENV, KEYRING_FILE
    from feltdb.storage.targets import sqlite_path

    if os.environ.get(KEYRING_ENV):
        return KeyringChoice(None)
    if given is not None:
        if not given.is_file():
            raise usage_error(
                f"no keyring at {given.absolute()} (--keyring): feltdb keys new --out "
                f"{given} makes one; a server must hold it to trust what it signs"
            )
        return KeyringChoice(given)
    store_file = sqlite_path(db)
    if store_file is None:
        # The URL is not repeated: it may carry a password.
        raise usage_error(
            "a store in a database (--db URL) has no file to keep its keyring beside: give "
            f"the keyring its servers use, --keyring PATH or {KEYRING_ENV} (its JSON); "
            "feltdb keys new --out PATH makes one. Nothing was written"
        )
    return KeyringChoice(store_file.parent / KEYRING_FILE, create=True)


def open_keyring(choice: KeyringChoice) -> Keyring:
    """The keyring ``choice`` names, after saying on stderr which it is (its absolute path,
    or ``FELTDB_KEYRING``): read, or created when ``choice.create`` allows and there is
    none yet (and then said so).

    Raises:
        OSError: the file cannot be read or written.
        WorkloadError: ``WORKLOAD_INVALID`` when the file or the variable holds no keyring.
    """
    from feltdb.auth.keyrings import KEYRING_ENV, environment_keyring, load_or_create_keyring
    from feltdb.auth.tokens import Keyring

    if choice.path is None:
        from_env = environment_keyring()
        assert from_env is not None  # chosen because the variable is set
        _say(f"using keyring from {KEYRING_ENV}")
        return from_env
    shown = choice.path.absolute()
    if not choice.create:
        ring = Keyring.load(choice.path)
    else:
        # The admin token a new keyring comes with is serve's to print, not this command's.
        ring, made = load_or_create_keyring(choice.path, int(time.time()))
        if made is not None:
            _say(f"created keyring {shown} beside the store, where feltdb serve finds it")
            return ring
    _say(f"using keyring {shown}")
    return ring


def _say(message: str) -> None:
    # On stderr: stdout stays what the command answers (JSON only, with --json).
    typer.echo(message, err=True)
