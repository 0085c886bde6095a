#!/usr/bin/env python3
"""Scale out, measured where it can be (issue 22): JOBS one-step no-op jobs enqueued in a fresh
PostgreSQL schema, then drained by P engine processes side by side (`shiftboss-lab bench jobs
--drain-only`, each with the engine's default settings and its own instance id), for each P given.

Besides jobs/s it reads what the model in docs/performance.md needs, per job: PostgreSQL's commits,
WAL records and bytes, rows inserted, updated and deleted (pg_stat_database and pg_stat_wal deltas:
run it on an otherwise quiet server), and CPU: the engine processes' own (their rusage) and the
rest of the machine's (/proc/stat's busy time less theirs: PostgreSQL, mostly).

Build first: cargo build --release --locked -p shiftboss -p shiftboss-lab --no-default-features
Then: python3 bench/scale_out.py [--pg URL] [--jobs 50000] [--processes 1,2,4]"""
import argparse
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
LAB = os.path.join(TARGET, "release", "shiftboss-lab")
TICK = os.sysconf("SC_CLK_TCK")


def psql(pg, sql):
    return subprocess.check_output(["psql", pg, "-Atqc", sql], text=True).strip()


def counters(pg):
    db = pg.rsplit("/", 1)[1].split("?")[0]
    row = psql(pg, "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database "
                   f"WHERE datname = '{db}'").split("|")
    wal = psql(pg, "SELECT wal_records, wal_bytes FROM pg_stat_wal").split("|")
    return {"commits": int(row[0]), "inserted": int(row[1]), "updated": int(row[2]), "deleted": int(row[3]),
            "wal_records": int(wal[0]), "wal_bytes": int(wal[1])}


def busy_seconds():
    """The machine's non-idle CPU time so far, in seconds (all cores)."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts[:8]) - idle) / TICK


def round_for(pg, jobs, processes):
    schema = f"scale_out_{processes}_{os.getpid()}"
    db = f"{pg}?schema={schema}"
    try:
        subprocess.check_call([LAB, "--db", db, "bench", "jobs", "--jobs", str(jobs), "--enqueue-only"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Let the enqueue's writes settle (checkpointer, autovacuum) before the counters are read.
        for table in ("tasks", "steps"):
            psql(pg, f"VACUUM ANALYZE {schema}.{table}")
        time.sleep(2)
        before, busy0, t0 = counters(pg), busy_seconds(), time.monotonic()
        children = [subprocess.Popen([LAB, "--db", db, "bench", "jobs", "--drain-only", "--defaults",
                                      "--instance", f"scale-{processes}-{i}"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                    for i in range(processes)]
        engine_cpu, outs = 0.0, []
        for c in children:
            _, status, usage = os.wait4(c.pid, 0)
            c.returncode = os.waitstatus_to_exitcode(status)
            engine_cpu += usage.ru_utime + usage.ru_stime
            outs.append(json.loads(c.stdout.read().strip().splitlines()[-1]))
            if c.returncode != 0:
                raise RuntimeError(f"a drainer ended with {c.returncode}")
        took = max(o["drain_s"] for o in outs)
        wall = time.monotonic() - t0
        after, busy1 = counters(pg), busy_seconds()
        left = int(psql(pg, f"SELECT count(*) FROM {schema}.tasks WHERE state NOT IN ('completed')"))
        d = {k: after[k] - before[k] for k in after}
        other_cpu = max(busy1 - busy0 - engine_cpu, 0.0)
        per = 1000 / jobs
        return {
            "processes": processes, "jobs": jobs, "jobs_per_s": round(jobs / took), "drain_s": round(took, 2),
            "wall_s": round(wall, 2), "not_completed": left,
            "shares": [o["completed_here"] for o in outs],
            "per_1000_jobs": {
                "commits": round(d["commits"] * per, 1), "wal_records": round(d["wal_records"] * per),
                "wal_kb": round(d["wal_bytes"] * per / 1024, 1), "rows_inserted": round(d["inserted"] * per),
                "rows_updated": round(d["updated"] * per), "rows_deleted": round(d["deleted"] * per),
                "engine_cpu_ms": round(engine_cpu * 1000 * per, 1), "other_cpu_ms": round(other_cpu * 1000 * per, 1),
            },
        }
    finally:
        subprocess.run(["psql", pg, "-qc", f"SET client_min_messages = warning; DROP SCHEMA IF EXISTS {schema} CASCADE"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg", default=os.environ.get("SHIFTBOSS_TEST_PG", "postgres://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--processes", default="1,2,4")
    a = ap.parse_args()
    for p in [int(x) for x in a.processes.split(",")]:
        print(json.dumps(round_for(a.pg, a.jobs, p)), flush=True)


if __name__ == "__main__":
    main()
