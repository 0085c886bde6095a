"""The machine's raw limits, in the same run: PostgreSQL single-row UPDATE transactions per second
(pgbench, a custom script, 1 and 8 clients) and SQLite one-row WAL commits per second (rusqlite,
through `shiftboss bench sqlite-commits`)."""
import os
import re
import tempfile

from .util import run

SCRIPT = """\\set id random(1, 1000)
UPDATE bench_counter SET n = n + 1 WHERE id = :id;
"""


def pgbench(pg, db_url, clients, seconds):
    """One-row UPDATEs, each its own transaction (autocommit), on a 1,000-row table so that clients
    rarely wait on one another's row locks. synchronous_commit is the server's (on)."""
    pg.sql("DROP TABLE IF EXISTS bench_counter", db_url)
    pg.sql("CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL)", db_url)
    pg.sql("INSERT INTO bench_counter SELECT g, 0 FROM generate_series(1, 1000) g", db_url)
    pg.sql("VACUUM ANALYZE bench_counter", db_url)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(SCRIPT)
    try:
        out = run(["pgbench", "-n", "-f", f.name, "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds),
                   db_url])
    finally:
        os.unlink(f.name)
    m = re.search(r"tps = ([0-9.]+)", out)
    if not m:
        raise ValueError(f"no tps in pgbench output: {out[-300:]!r}")
    return {"clients": clients, "seconds": seconds, "tps": float(m.group(1))}


def sqlite_commits(sb, path, synchronous, seconds):
    return sb.bench(path, "sqlite-commits", "--synchronous", synchronous, "--for", f"{seconds}s")
