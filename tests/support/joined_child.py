"""Child-process body for ``tests/reliability/test_joined_processes.py``: an application
that, in each of its own transactions, writes an order row and admits the work of that
order (``store.admit(..., connection=conn)``), then commits, and prints the order's
number once the commit returned, until it is killed.

Run as ``python -m support.joined_child TARGET FIRST`` (``tests`` on ``sys.path``).
"""

from __future__ import annotations

import sys
from itertools import count

from feltdb import WorkloadStore
from support.app_rows import begin, commit, connect, insert_order
from support.factories import make_request


def main(target: str, first: int) -> None:
    with WorkloadStore.open(target) as store:
        connection = connect(target)
        for number in count(first):
            begin(connection)
            insert_order(connection, f"order-{number}")
            store.admit(make_request(idempotency_key=f"order-{number}"), connection=connection)
            commit(connection)
            print(number, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
