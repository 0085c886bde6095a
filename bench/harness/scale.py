"""Claim and sweep cost with many finished records: fill the store with finished tasks and steps by
bulk SQL (one completed task and one processed step per record; events are not filled: neither the
claim nor the sweep reads them), then time the claim.

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
VACUUM ANALYZE tasks;
VACUUM ANALYZE steps;
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
ANALYZE;
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
VACUUM ANALYZE tasks_history;
VACUUM ANALYZE steps_history;
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
ANALYZE;
"""


def _max_task_id_pg(db):
    base, schema = db.split("?schema=")
    return int(run(["psql", base, "-Atqc", f"SELECT coalesce(max(id), 0) FROM {schema}.tasks"]).strip())


def fill(db, start, end, place="hot"):
    """Adds finished records numbered start..end (inclusive) to the store `db`, in its hot tables or
    its history."""
    log(f"filling finished records {start:,}..{end:,} ({place})")
    if db.startswith("postgres"):
        base, schema = db.split("?schema=")
        if place == "history":
            sql = PG_FILL_HISTORY.format(schema=schema, start=start, end=end, base=HISTORY_ID)
        else:
            sql = PG_FILL.format(schema=schema, start=start, end=end, after_id=_max_task_id_pg(db))
        # From a file, so each statement is its own transaction (VACUUM refuses a transaction block).
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(sql)
        try:
            run(["psql", base, "-v", "ON_ERROR_STOP=1", "-q", "-f", f.name], timeout=7200)
        finally:
            os.unlink(f.name)
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


def measure(sb, db, levels, rounds, place="hot"):
    """Claim, completion and sweep times at each level of finished records (ascending)."""
    out = []
    have = 0
    sb.bench(db, "claim", "--rounds", 1, "--batch", 1)  # creates the store and registers the workflow
    for level in levels:
        if level > have:
            fill(db, have + 1, level, place)
            have = level
        r = sb.bench(db, "claim", "--rounds", rounds, "--finished", level)
        r["place"] = place
        log(f"claim at {level:,} finished ({place}): p50 {r['claim']['p50_ms']} ms, sweep p50 {r['sweep']['p50_ms']} ms")
        out.append(r)
    return out
