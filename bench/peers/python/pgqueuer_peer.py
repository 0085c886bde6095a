#!/usr/bin/env python3
"""pgqueuer 1.6 as a benchmark peer: N no-op jobs enqueued in bulk, then drained by one worker.

Usage: pgqueuer_peer.py DSN N [SLOTS]   (DSN: an empty database; pgqueuer installs its tables there)
Prints one JSON line: {"peer": "pgqueuer", "jobs": N, "drain_s": ..., "jobs_per_s": ...}.
"""
import asyncio
import json
import sys
import time

import asyncpg
from pgqueuer import QueueManager
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

# Its knobs: max_concurrent_tasks, the jobs this worker holds at once (set to the level every
# system runs at), and batch_size, jobs per dequeue (and per batch of completions), which it wants
# at most half of max_concurrent_tasks: half, as shiftboss claims.
ENQUEUE_CHUNK = 10_000


async def main(dsn: str, n: int, slots: int) -> None:
    batch = max(1, slots // 2)
    conn = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(conn))
    if not await queries.schema_is_installed():
        await queries.install()
    for start in range(0, n, ENQUEUE_CHUNK):
        k = min(ENQUEUE_CHUNK, n - start)
        await queries.enqueue(["noop"] * k, [None] * k, [0] * k)

    qm = QueueManager(queries)

    @qm.entrypoint("noop")
    async def noop(job) -> None:
        return None

    t0 = time.perf_counter()
    # drain: returns once the queue is empty and every completion is written.
    await qm.run(batch_size=batch, max_concurrent_tasks=2 * batch, mode=QueueExecutionMode.drain)
    drain = time.perf_counter() - t0
    print(json.dumps({"peer": "pgqueuer", "db": "postgres", "jobs": n, "drain_s": drain, "jobs_per_s": n / drain,
                      "knob": f"max_concurrent_tasks {2 * batch}, batch_size {batch}"}))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) == 4 else 400))
