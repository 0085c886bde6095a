"""The HTTP agent's cost per job through `shiftboss serve` (issue 19): JOBS one-step retry jobs
enqueued in a fresh PostgreSQL schema, then drained by one `serve` with its default settings whose
agent `noop` calls a fast axum sink on loopback (the engine's example `outbound_calls sink`), over
plain HTTP and over HTTPS (a CA made by the sink, given to the agent as its ca_bundle; HTTP/2 by
ALPN). Each figure is taken two ways: wall time from serve's start to the last step seen processed
(polled every 100 ms), and the store's own clock from the first claim to the last step's end."""
import os
import subprocess
import tempfile
import time

from .util import ROOT, log

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def build_sink(release=True):
    """The sink, built in its own cargo build (an example of the engine's)."""
    profile = ["--release"] if release else []
    log("building the HTTP sink (the engine's example outbound_calls)")
    subprocess.check_call(["nice", "-n", "10", "cargo", "build", *profile, "--locked", "-q", "-p", "shiftboss-engine",
                           "--example", "outbound_calls"], cwd=ROOT, env={**os.environ, "CARGO_TARGET_DIR": TARGET})
    return os.path.join(TARGET, "release" if release else "debug", "examples", "outbound_calls")


def measure(sb, lab, sink_exe, pg, jobs, concurrency=None):
    """Both modes; a dict per mode."""
    sink = subprocess.Popen([sink_exe, "sink"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = dict(sink.stdout.readline().split() for _ in range(3))
    try:
        return {mode: drain(sb, lab, pg, jobs, mode, info, concurrency) for mode in ("http", "https")}
    finally:
        sink.stdin.close()
        sink.wait()


def psql(pg, sql):
    return subprocess.check_output(["psql", pg, "-Atqc", sql], text=True).strip()


class _Live:
    """Whether a schema still has live steps, asked over one psql session. A psql process and a
    connection per look, with a count over every step, ten times a second, took a tenth of the
    machine from the drain it measured (perf, whole system: psql 9.5%)."""

    def __init__(self, pg, schema):
        self.p = subprocess.Popen(["psql", pg, "-Atq", "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        # Each EXISTS reads the state's partial index, and stops at its first row.
        self.sql = (f"SELECT EXISTS (SELECT 1 FROM {schema}.steps WHERE state = 'pending') "
                    f"OR EXISTS (SELECT 1 FROM {schema}.steps WHERE state = 'processing');\n")

    def any(self):
        self.p.stdin.write(self.sql)
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the psql session ended")
        return line.strip() == "t"

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def drain(sb, lab, pg, jobs, mode, info, concurrency):
    base = pg.split("?")[0]
    schema = f"bench_agent_{mode}_{os.getpid()}"
    db = f"{base}?schema={schema}"
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as cfg:
        # The sink listens on loopback, which the SSRF guard refuses unless allowed.
        cfg.write(f'[outbound]\nallow = ["127.0.0.1"]\n[agents.noop]\nbase_url = "{info[mode]}/noop"\n')
        if mode == "https":
            cfg.write(f'ca_bundle = "{info["ca"]}"\n')
    live = None
    try:
        subprocess.check_call([sb, "--db", db, "migrate"], stdout=subprocess.DEVNULL)
        subprocess.check_call([lab, "--db", db, "bench", "jobs", "--jobs", str(jobs), "--enqueue-only"],
                              stdout=subprocess.DEVNULL)
        # No API (it would make its first admin token in the working directory): the roles only.
        flags = ["--concurrency", str(concurrency)] if concurrency else []
        out = tempfile.NamedTemporaryFile("w+", suffix=".log")
        # Connected before serve starts, so that its start is not in the drain's time.
        live = _Live(base, schema)
        p = subprocess.Popen([sb, "--db", db, "--config", cfg.name, "serve", "--instance-id", "bench-agent",
                              "--listen", "off", *flags, "--stop-when-stdin-closes"], stdin=subprocess.PIPE, stderr=out)
        t0 = time.monotonic()
        while live.any():
            if p.poll() is not None or time.monotonic() - t0 > 300:
                out.seek(0)
                raise RuntimeError(f"serve exited or did not drain within 5 minutes; its log ends:\n{out.read()[-2000:]}")
            time.sleep(0.1)
        took = time.monotonic() - t0
        live.close()
        p.stdin.close()
        p.wait(timeout=30)
        left = int(psql(base, f"SELECT count(*) FROM {schema}.steps WHERE state <> 'processed'"))
        span_s = float(psql(base, f"SELECT max(updated_at) - min(claimed_at) FROM {schema}.steps")) / 1000
        return {"workload": "agent_http", "mode": mode, "jobs": jobs, "wall_s": round(took, 3),
                "jobs_per_s_wall": round(jobs / took), "store_span_s": round(span_s, 3),
                "jobs_per_s": round(jobs / span_s), "not_processed": left,
                "concurrency": concurrency or "default"}
    finally:
        if live is not None and live.p.poll() is None:
            live.p.kill()
        os.unlink(cfg.name)
        subprocess.run(["psql", base, "-qc", f"SET client_min_messages = warning; DROP SCHEMA IF EXISTS {schema} CASCADE"])
