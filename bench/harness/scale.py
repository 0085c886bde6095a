"""Claim and sweep cost with many finished records: one store per level, each filled with finished
tasks and steps by bulk SQL (one completed task and one processed step per record; events are not
filled: neither the claim nor the sweep reads them) and settled alike (vacuumed and analyzed, the
empty one too), then the claim timed on all of them in one process, round by round in turn, so that
the machine's other load falls on every level alike.

Two placements: `hot` puts the records in the hot tables (a store whose archiver is off), `history`
in the `*_history` tables, where the archiver moves finished tasks (the default deployment). The
history rows take ids far above the hot ones, as archived tasks have ids of their own."""
import os
import sqlite3
import tempfile

from .util import log, run

PG_FILL = """
SET search_path TO {schema};
INSERT INTO tasks (task_key, workflow, workflow_version, state, input, output, created_at, updated_at, bucket)
SELECT 'fill-' || g, 'bench-noop', 1, 'completed', '{{}}', 'null', 0, 0, g % 256
FROM generate_series({start}, {end}) g;
INSERT INTO steps (task_id, name, agent, state, due_at, input, output, idempotency_key, timeout_ms,
                   created_at, updated_at, bucket, attempts, lease_token, config)
SELECT t.id, 'noop', 'noop', 'processed', 0, '{{}}', 'null', 'fill-' || t.id, 1000, 0, 0, t.bucket, 1, 1,
       '{{"url":"/noop"}}'
FROM tasks t WHERE t.task_key LIKE 'fill-%' AND t.id > {after_id};
"""

SQLITE_FILL = """
WITH RECURSIVE g(n) AS (SELECT {start} UNION ALL SELECT n + 1 FROM g WHERE n < {end})
INSERT INTO tasks (task_key, workflow, workflow_version, state, input, output, created_at, updated_at, bucket)
SELECT 'fill-' || n, 'bench-noop', 1, 'completed', '{{}}', 'null', 0, 0, n % 256 FROM g;
INSERT INTO steps (task_id, name, agent, state, due_at, input, output, idempotency_key, timeout_ms,
                   created_at, updated_at, bucket, attempts, lease_token, config)
SELECT t.id, 'noop', 'noop', 'processed', 0, '{{}}', 'null', 'fill-' || t.id, 1000, 0, 0, t.bucket, 1, 1,
       '{{"url":"/noop"}}'
FROM tasks t WHERE t.id > {after_id} AND t.task_key LIKE 'fill-%';
"""


# The history tables have the hot tables' columns without their defaults: every NOT NULL is named.
HISTORY_ID = 1_000_000_000_000

PG_FILL_HISTORY = """
SET search_path TO {schema};
INSERT INTO tasks_history (id, task_key, workflow, workflow_version, state, priority, input, output, created_at,
                           updated_at, bucket, depth)
SELECT {base} + g, 'hist-' || g, 'bench-noop', 1, 'completed', 0, '{{}}', 'null', 0, 0, g % 256, 0
FROM generate_series({start}, {end}) g;
INSERT INTO steps_history (id, task_id, name, agent, state, lease_token, due_at, priority, failure_count, attempts,
                           input, output, idempotency_key, timeout_ms, config, created_at, updated_at, bucket, kind,
                           on_timeout)
SELECT {base} + g, {base} + g, 'noop', 'noop', 'processed', 1, 0, 0, 0, 1, '{{}}', 'null', 'hist-' || g, 1000,
       '{{"url":"/noop"}}', 0, 0, g % 256, 'agent', 'retry'
FROM generate_series({start}, {end}) g;
"""

SQLITE_FILL_HISTORY = """
WITH RECURSIVE g(n) AS (SELECT {start} UNION ALL SELECT n + 1 FROM g WHERE n < {end})
INSERT INTO tasks_history (id, task_key, workflow, workflow_version, state, priority, input, output, created_at,
                           updated_at, bucket, depth)
SELECT {base} + n, 'hist-' || n, 'bench-noop', 1, 'completed', 0, '{{}}', 'null', 0, 0, n % 256, 0 FROM g;
WITH RECURSIVE g(n) AS (SELECT {start} UNION ALL SELECT n + 1 FROM g WHERE n < {end})
INSERT INTO steps_history (id, task_id, name, agent, state, lease_token, due_at, priority, failure_count, attempts,
                           input, output, idempotency_key, timeout_ms, config, created_at, updated_at, bucket, kind,
                           on_timeout)
SELECT {base} + n, {base} + n, 'noop', 'noop', 'processed', 1, 0, 0, 0, 1, '{{}}', 'null', 'hist-' || n, 1000,
       '{{"url":"/noop"}}', 0, 0, n % 256, 'agent', 'retry' FROM g;
"""

# Every store of a run, filled or not, settles the same way before it is timed.
PG_SETTLE = """
SET search_path TO {schema};
VACUUM ANALYZE tasks;
VACUUM ANALYZE steps;
VACUUM ANALYZE tasks_history;
VACUUM ANALYZE steps_history;
CHECKPOINT;
"""

SQLITE_SETTLE = "ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);"


def _max_task_id_pg(db):
    base, schema = db.split("?schema=")
    return int(run(["psql", base, "-Atqc", f"SELECT coalesce(max(id), 0) FROM {schema}.tasks"]).strip())


def _psql_file(db, sql):
    """Runs `sql` on the store `db` from a file, so each statement is its own transaction (VACUUM
    refuses a transaction block)."""
    base, _ = db.split("?schema=")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql)
    try:
        run(["psql", base, "-v", "ON_ERROR_STOP=1", "-q", "-f", f.name], timeout=7200)
    finally:
        os.unlink(f.name)


def fill(db, start, end, place="hot"):
    """Adds finished records numbered start..end (inclusive) to the store `db`, in its hot tables or
    its history."""
    log(f"filling finished records {start:,}..{end:,} ({place})")
    if db.startswith("postgres"):
        schema = db.split("?schema=")[1]
        if place == "history":
            _psql_file(db, PG_FILL_HISTORY.format(schema=schema, start=start, end=end, base=HISTORY_ID))
        else:
            _psql_file(db, PG_FILL.format(schema=schema, start=start, end=end, after_id=_max_task_id_pg(db)))
    else:
        c = sqlite3.connect(db, timeout=60)
        try:
            if place == "history":
                c.executescript(SQLITE_FILL_HISTORY.format(start=start, end=end, base=HISTORY_ID))
            else:
                after = c.execute("SELECT coalesce(max(id), 0) FROM tasks").fetchone()[0]
                c.executescript(SQLITE_FILL.format(start=start, end=end, after_id=after))
            c.commit()
        finally:
            c.close()


def settle(db):
    """Vacuums, analyzes and checkpoints the store `db`, filled or not."""
    if db.startswith("postgres"):
        _psql_file(db, PG_SETTLE.format(schema=db.split("?schema=")[1]))
    else:
        c = sqlite3.connect(db, timeout=60)
        try:
            c.executescript(SQLITE_SETTLE)
        finally:
            c.close()


def drop(db):
    """Removes a measured store, so the next placement's stores have the disk."""
    if db.startswith("postgres"):
        base, schema = db.split("?schema=")
        run(["psql", base, "-qc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"])
    else:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)


def measure(sb, db_for, levels, rounds, place="hot"):
    """Claim, completion and sweep times at each level of finished records: one store per level
    (`db_for(name)` gives a fresh one), timed in turn within one process."""
    stores = []
    for level in levels:
        db = db_for(f"scale_{place}_{level}")
        sb.bench(db, "claim", "--rounds", 0, "--warmup", 0)  # creates the store, registers the workflow
        if level > 0:
            fill(db, 1, level, place)
        settle(db)
        stores.append(f"{level}={db}")
    log(f"timing the claim at {', '.join(f'{x:,}' for x in levels)} finished ({place}), {rounds} rounds each in turn")
    r = sb.bench(stores[0].split("=", 1)[1], "claim", "--rounds", rounds, *[x for s in stores for x in ("--store", s)])
    for level_store in stores:
        drop(level_store.split("=", 1)[1])
    out = []
    for lv in r["levels"]:
        lv["place"] = place
        log(f"claim at {lv['finished_records']:,} finished ({place}): p50 {lv['claim']['p50_ms']} ms, "
            f"sweep p50 {lv['sweep']['p50_ms']} ms")
        out.append(lv)
    return out
