"""One `shiftboss serve` process: its database transactions per second when idle (PostgreSQL's
pg_stat_database), and its peak RSS (VmHWM) idle and under load."""
import http.server
import os
import sqlite3
import subprocess
import threading
import time

from .util import log, run


def vm(pid, field):
    """A field of /proc/PID/status in kB (VmHWM: peak resident set; VmRSS: now)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


class _Sink(http.server.BaseHTTPRequestHandler):
    """The remote service of the load test: answers every call at once."""

    def do_POST(self):  # noqa: N802: the name http.server calls
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


class _SinkServer(http.server.ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: with hundreds of calls connecting at once, the
    # kernel drops the SYNs past it and the client resends them only after a second, which made
    # calls outlive their 1 s complete-by. A backlog as deep as the serve's concurrency avoids it.
    request_queue_size = 1024


def start_sink():
    server = _SinkServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def start_serve(sb, db, instance, sink_url=None):
    cmd = [sb.exe, "--db", db, "serve", "--listen", "off", "--instance-id", instance, "--stop-when-stdin-closes"]
    if sink_url:
        # The sink listens on loopback, which the SSRF guard refuses unless allowed.
        cmd += ["--agent", f"noop={sink_url}", "--allow-outbound", "127.0.0.1", "--concurrency", "256"]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=sb.workdir)


def stop_serve(p):
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def idle(sb, pg, db, db_name, seconds, settle):
    """An idle serve (scheduler and supervisor, defaults) for `seconds`: transactions committed in
    its own database per second (PostgreSQL only; `db_name` None skips it), and its RSS.
    PostgreSQL flushes a backend's counters when it goes idle, at most every 10 s, or when it
    exits: the count starts after `settle` seconds and ends after the process has exited."""
    run([sb.exe, "--db", db, "migrate"], cwd=sb.workdir)
    p = start_serve(sb, db, "bench-idle")
    try:
        time.sleep(settle)
        c0 = pg.xact_commit(db_name) if db_name else None
        time.sleep(seconds)
        hwm, rss = vm(p.pid, "VmHWM"), vm(p.pid, "VmRSS")
    finally:
        stop_serve(p)
    out = {"seconds": seconds, "vm_hwm_kb": hwm, "vm_rss_kb": rss}
    if db_name:
        time.sleep(1.5)
        out["xacts"] = pg.xact_commit(db_name) - c0
        out["xact_per_s"] = out["xacts"] / seconds
    return out


def _live_steps(db):
    if db.startswith("postgres"):
        base, schema = db.split("?schema=")
        out = run(["psql", base, "-Atqc", f"SELECT count(*) FROM {schema}.steps WHERE state IN ('pending', 'processing')"])
        return int(out.strip())
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return c.execute("SELECT count(*) FROM steps WHERE state IN ('pending', 'processing')").fetchone()[0]
    finally:
        c.close()


def under_load(sb, db, jobs):
    """`jobs` no-op jobs enqueued, then run by a serve process over HTTP against a local sink; its
    peak RSS while it drains them."""
    enq = sb.bench(db, "jobs", "--jobs", jobs, "--enqueue-only")
    server, url = start_sink()
    p = start_serve(sb, db, "bench-load", url)
    t0 = time.monotonic()
    try:
        while _live_steps(db) > 0:
            if time.monotonic() - t0 > 1800:
                raise TimeoutError("serve did not drain within 30 minutes")
            time.sleep(0.5)
        drain = time.monotonic() - t0
        hwm = vm(p.pid, "VmHWM")
    finally:
        stop_serve(p)
        server.shutdown()
    log(f"serve under load: {jobs} jobs over HTTP in {drain:.1f} s, VmHWM {hwm} kB")
    return {"jobs": jobs, "enqueue_s": enq["enqueue_s"], "drain_s": drain, "vm_hwm_kb": hwm}


class _ServeWithApi:
    """A `serve` process with its API on a free loopback port, its first admin token in a file;
    stopped (stdin closed) when the block ends."""

    def __init__(self, sb, db, args):
        self.sb, self.db, self.args = sb, db, args

    def __enter__(self):
        sb = self.sb
        self.token = os.path.join(sb.workdir, f"api-{os.getpid()}-{time.monotonic_ns()}.token")
        logf = self.token + ".log"
        with open(logf, "w") as err:
            self.p = subprocess.Popen([sb.exe, "--db", self.db, "serve", *self.args, "--listen", "127.0.0.1:0",
                                       "--admin-token-file", self.token, "--stop-when-stdin-closes"],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, cwd=sb.workdir)
        self.url = None
        t0 = time.monotonic()
        while self.url is None:
            if self.p.poll() is not None or time.monotonic() - t0 > 60:
                stop_serve(self.p)
                raise RuntimeError(f"serve {' '.join(self.args)} did not start: " + open(logf).read())
            for line in open(logf).read().splitlines():
                if "api (http://" in line:
                    self.url = line.split("api (", 1)[1].split(")", 1)[0]
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        stop_serve(self.p)


def api_submit(sb, db, tasks, clients):
    """Issue 16: `tasks` submissions through the HTTP API of one `serve --roles api`, from `clients`
    concurrent keep-alive clients (`shiftboss-lab bench api`); submissions/s, call latency, and the
    serve process's peak RSS under that load."""
    with _ServeWithApi(sb, db, ["--roles", "api"]) as s:
        out = sb.bench(db, "api", "--url", s.url, "--token-file", s.token, "--tasks", tasks, "--clients", clients)
        out["vm_hwm_kb"] = vm(s.p.pid, "VmHWM")
    log(f"API submissions: {out['submissions_per_s']:,.0f}/s, VmHWM {out['vm_hwm_kb']} kB")
    return out


def remote_workers(sb, db, steps, workers, concurrency, protocol="native"):
    """Issue 17: `steps` one-step no-op steps drained by `workers` worker processes
    (`concurrency` slots each, polling in batches: the Rust client for the native protocol, or
    Conductor's batch poll and one update per task) through one `serve --remote-agent noop`, then
    the pickup of a waiting long poll (`shiftboss-lab bench remote`)."""
    with _ServeWithApi(sb, db, ["--remote-agent", "noop"]) as s:
        out = sb.bench(db, "remote", "--url", s.url, "--token-file", s.token, "--steps", steps,
                       "--workers", workers, "--concurrency", concurrency, "--protocol", protocol)
    log(f"remote workers ({protocol}) x{workers}: {out['steps_per_s']:,.0f} steps/s, pickup {out.get('pickup')}")
    return out
