"""Shared pieces of the benchmark suite: child processes, timing, machine facts, PostgreSQL.

Everything here is standard library only, so the peers' interpreter (``bench/.peers-venv``)
can import :mod:`harness.child` too.
"""
