#!/usr/bin/env python3
"""The HTTP agent's cost per job through `shiftboss serve` (issue 19): JOBS one-step retry jobs
enqueued in a fresh PostgreSQL schema, then drained by one `serve` whose agent `noop` calls a fast
axum sink on loopback (the engine's example `outbound_calls sink`), over plain HTTP and over HTTPS
(a CA made by the sink, given to the agent as its ca_bundle; HTTP/2 by ALPN).

Build first (the release build of bench/run, and the sink):
    cargo build --release --locked -p shiftboss -p shiftboss-lab --no-default-features
    cargo build --release --locked -p shiftboss-engine --example outbound_calls
Then: python3 bench/agent_http.py [JOBS] (default 20000; --pg URL as bench/run's default).
Not yet part of bench/run's report."""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
SB = os.path.join(TARGET, "release", "shiftboss")
LAB = os.path.join(TARGET, "release", "shiftboss-lab")
SINK = os.path.join(TARGET, "release", "examples", "outbound_calls")


def main():
    args = sys.argv[1:]
    pg = os.environ.get("SHIFTBOSS_TEST_PG", "postgres://postgres@127.0.0.1:5432/test")
    if "--pg" in args:
        i = args.index("--pg")
        pg = args[i + 1]
        del args[i:i + 2]
    jobs = int(args[0]) if args else 20000
    sink = subprocess.Popen([SINK, "sink"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = dict(sink.stdout.readline().split() for _ in range(3))
    try:
        for mode in ["http", "https"]:
            print(drain(pg, jobs, mode, info), flush=True)
    finally:
        sink.stdin.close()
        sink.wait()


def psql(pg, sql):
    return subprocess.check_output(["psql", pg, "-Atqc", sql], text=True).strip()


def drain(pg, jobs, mode, info):
    schema = f"bench_agent_{mode}_{os.getpid()}"
    db = f"{pg}?schema={schema}"
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as cfg:
        # The sink listens on loopback, which the SSRF guard refuses unless allowed.
        cfg.write(f'[outbound]\nallow = ["127.0.0.1"]\n[agents.noop]\nbase_url = "{info[mode]}/noop"\n')
        if mode == "https":
            cfg.write(f'ca_bundle = "{info["ca"]}"\n')
    try:
        subprocess.check_call([SB, "--db", db, "migrate"], stdout=subprocess.DEVNULL)
        subprocess.check_call([LAB, "--db", db, "bench", "jobs", "--jobs", str(jobs), "--enqueue-only"],
                              stdout=subprocess.DEVNULL)
        # No API (it would make its first admin token in the working directory): the roles only.
        log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        p = subprocess.Popen([SB, "--db", db, "--config", cfg.name, "serve", "--instance-id", "bench-agent",
                              "--listen", "off", "--concurrency", "256", "--stop-when-stdin-closes"],
                             stdin=subprocess.PIPE, stderr=log)
        t0 = time.monotonic()
        live = f"SELECT count(*) FROM {schema}.steps WHERE state IN ('pending', 'processing')"
        while int(psql(pg, live)) > 0:
            if p.poll() is not None or time.monotonic() - t0 > 300:
                log.seek(0)
                raise RuntimeError(f"serve exited or did not drain within 5 minutes; its log ends:\n{log.read()[-2000:]}")
            time.sleep(0.1)
        took = time.monotonic() - t0
        p.stdin.close()
        p.wait(timeout=30)
        left = psql(pg, f"SELECT count(*) FROM {schema}.steps WHERE state <> 'processed'")
        return f"serve + HTTP agent over {mode}: {jobs} jobs in {took:.2f} s = {jobs / took:.0f} jobs/s ({left} not processed)"
    finally:
        os.unlink(cfg.name)
        subprocess.run(["psql", pg, "-qc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
