#!/usr/bin/env python3
"""procrastinate 3 as a benchmark peer: N no-op jobs deferred in batches, then drained by one worker.

Usage: procrastinate_peer.py DSN N SLOTS   (DSN: an empty database; procrastinate installs its schema there)
Prints one JSON line: {"peer": "procrastinate", "jobs": N, "drain_s": ..., "jobs_per_s": ..., "knob": ...}.

SLOTS, the jobs in flight every system of the comparison runs with, is the worker's `concurrency`
(its one knob for it: jobs run at once, each fetched on its own). Its connection pool is capped
below the server's max_connections.
"""
import asyncio
import json
import sys
import time

import procrastinate

DEFER_CHUNK = 5_000
POOL = 40


async def main(dsn: str, n: int, slots: int) -> None:
    pool = min(slots + 2, POOL)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=pool))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, n, DEFER_CHUNK):
            await noop.batch_defer_async(*([{}] * min(DEFER_CHUNK, n - start)))
        t0 = time.perf_counter()
        # wait=False: the worker returns once it has caught up with the queue and its jobs ended.
        await app.run_worker_async(concurrency=slots, wait=False, install_signal_handlers=False)
        drain = time.perf_counter() - t0
    print(json.dumps({"peer": "procrastinate", "db": "postgres", "jobs": n, "drain_s": drain, "jobs_per_s": n / drain,
                      "knob": f"concurrency {slots} (jobs run at once), pool of {pool} connections"}))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
