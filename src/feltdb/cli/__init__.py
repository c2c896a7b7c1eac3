"""The ``feltdb`` command: parse, call the library, render. No logic of its own.

One module per group of commands: :mod:`~feltdb.cli.grants` (``keys``, ``grant``),
:mod:`~feltdb.cli.submit`, :mod:`~feltdb.cli.work` (``ls``, ``inbox``, ``dead``, ``show``,
``approve``, ``reject``, ``cancel``, ``retry``), :mod:`~feltdb.cli.audit`,
:mod:`~feltdb.cli.migrate`, :mod:`~feltdb.cli.worker`, :mod:`~feltdb.cli.serve` (``serve``,
``demo``); :mod:`~feltdb.cli.application` puts them together. The operator commands
reach the authority through :mod:`~feltdb.cli.targets` (signing, on a store, with the
keyring :mod:`~feltdb.cli.keyrings` finds) and show what it answers with
:mod:`~feltdb.cli.render`.

This module imports none of them until a command runs: ``feltdb --version`` answers from
here, at the cost of starting Python.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the command (:func:`feltdb.cli.application.main`); ``feltdb
    --version`` alone is answered without importing the command line or the authority.
    """
    if sys.argv[1:] == ["--version"]:
        from feltdb import __version__

        sys.stdout.write(f"feltdb {__version__}\n")
        return
    from feltdb.cli.application import main as run

    run()


def __getattr__(name: str) -> Any:
    """``app``, the typer application, imported on first use (PEP 562)."""
    if name == "app":
        from feltdb.cli.application import app

        return app
    raise AttributeError(f"module 'feltdb.cli' has no attribute {name!r}")
