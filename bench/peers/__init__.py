"""The peers' drivers, run with ``bench/.peers-venv/bin/python -m peers.NAME``.

Each module answers three subcommands: ``prepare --target T --n N`` (schema and a backlog
of N no-op tasks, loaded in bulk, untimed), ``work --target T --index I`` (one worker
process of a drain, speaking :mod:`harness.child`'s protocol) and ``count --target T``
(prints how many tasks finished, as the peer records it).
"""
