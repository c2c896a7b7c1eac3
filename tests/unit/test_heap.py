"""settle_heap: what start-up made is frozen, young collections are rarer (own process)."""

from __future__ import annotations

import subprocess
import sys


def test_settling_freezes_what_start_up_made_and_raises_the_young_threshold():
    probe = (
        "import gc\n"
        "from feltdb.heap import YOUNG_THRESHOLD, settle_heap\n"
        "import feltdb.work.store\n"
        "before = (gc.get_freeze_count(), gc.get_threshold())\n"
        "settle_heap()\n"
        "after = (gc.get_freeze_count(), gc.get_threshold())\n"
        "print(before[0], after[0] > 10_000, after[1] == (YOUNG_THRESHOLD, *before[1][1:]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "True", "True"]


def test_a_worker_run_outside_the_main_thread_leaves_the_collector_alone():
    probe = (
        "import gc, threading\n"
        "from feltdb.worker.connecting import own_process\n"
        "seen = []\n"
        "thread = threading.Thread(target=lambda: seen.append(own_process(print)))\n"
        "thread.start(); thread.join()\n"
        "print(gc.get_freeze_count(), gc.get_threshold()[0])\n"
        "own_process(print)\n"
        "print(gc.get_freeze_count() > 0, gc.get_threshold()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "700", "True", "50000"]
