"""The garbage collector of a process feltdb owns (``feltdb serve``, ``feltdb worker``, a
``Worker.run`` in the main thread): what start-up made is frozen out of its reach, and
collections of young objects are made rarer.

A workload's lifecycle makes a few hundred short-lived objects (a decoded record, its
events, a log entry), all freed by reference counting; almost none is in a cycle. The
cyclic collector still counts them, and by default runs a young collection every 700
allocations and, every so often, a full one that walks every object the process ever
kept: the modules, the validators, the app. Measured on the batch path
(``bench/bench_cpu_profile.py``), that was a third of a lifecycle's CPU, mostly full
collections. ``gc.freeze()`` moves what start-up made into a generation the collector
never walks; the higher first threshold lets cycles still be found, in batches. Nothing
here is undone: the process is taken to be feltdb's from then on.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG_THRESHOLD: Final = 50_000
"""Allocations (less deallocations) between two young collections (CPython's default: 700)."""


def settle_heap() -> None:
    """Collect once, freeze every object that survives (start-up's), and raise the young
    generation's threshold. Safe to call again: what was made since is frozen too.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
