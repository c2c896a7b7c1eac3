"""The command line every peer module shares."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def main(
    prepare: Callable[[str, int], None],
    work: Callable[[str, int], None],
    count: Callable[[str], int],
    doc: str,
) -> None:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("command", choices=("prepare", "work", "count"))
    parser.add_argument("--target", required=True, help="a folder (SQLite peers) or a URL")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--index", type=int, default=0)
    options = parser.parse_args()
    if options.command == "prepare":
        prepare(options.target, options.n)
    elif options.command == "work":
        work(options.target, options.index)
    else:
        print(count(options.target))
