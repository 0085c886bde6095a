#!/usr/bin/env python3
"""The demo through a failover (issue 26), as a user would meet one: `shiftboss demo` with its own
`serve` children on a replicated PostgreSQL made here (a primary and a standby on spare loopback
ports, initdb and pg_basebackup of the installed server), the primary crashed mid-run, the standby
promoted. The demo rides out the outage (--store-wait) and finishes; then it is run again, as an
operator would after a failover that may have lost commits: it submits its orders again under
their keys. Its services' ledger counts the effects applied twice.

    python3 bench/failover.py [--bin PATH] [--replication sync|async] [--orders N] [--rounds K]

Per round it prints: acknowledged tasks the promoted standby lacked, task ids handed out again to
another order, effects applied twice, and the time from the promotion to the first step completed.
With `--replication async` the standby is cut off (its WAL sender stopped) a moment before the
crash, so the promoted server lacks the last commits: what is lost then must be harmless when the
orders are submitted again (the same idempotency keys; no id of a lost task given to another).
`--bin` takes any build of the product, so two builds can be compared side by side.
Runs as root (the server binaries then run as `postgres`) or as a user who may run initdb.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
SCHEMA = "fo"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_postgres(cmd):
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def psql(port, sql):
    out = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres", "-XAtq", "-c", sql],
        capture_output=True, text=True, env={**os.environ, "PGCONNECT_TIMEOUT": "3"}, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout.strip()


def cluster_pids(data):
    try:
        main = int(open(os.path.join(data, "postmaster.pid")).readline())
    except (OSError, ValueError):
        return []
    pids = [main]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == main:
            pids.append(int(d))
    return pids


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


class Clusters:
    def __init__(self, bin_dir, synchronous):
        self.bin = bin_dir
        self.dir = tempfile.mkdtemp(prefix="sb-failover-")
        os.chmod(self.dir, 0o755)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        self.primary, self.standby = free_port(), free_port()
        p, s = self.data("primary"), self.data("standby")
        as_postgres([f"{self.bin}/initdb", "-D", p, "-U", "postgres", "-A", "trust", "--no-sync"])
        with open(f"{p}/postgresql.conf", "a") as f:
            f.write(f"port = {self.primary}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.dir}'\n"
                    f"wal_level = replica\nmax_wal_senders = 5\nfsync = off\nmax_connections = 100\n"
                    f"synchronous_standby_names = '{'standby' if synchronous else ''}'\n")
        self.pg_ctl(p, "start")
        conninfo = f"host=127.0.0.1 port={self.primary} user=postgres application_name=standby"
        as_postgres([f"{self.bin}/pg_basebackup", "-D", s, "-R", "-X", "stream", "-c", "fast", "-d", conninfo])
        with open(f"{s}/postgresql.conf", "a") as f:
            f.write(f"port = {self.standby}\nsynchronous_standby_names = ''\n")
        self.pg_ctl(s, "start")

    def data(self, name):
        return os.path.join(self.dir, name)

    def pg_ctl(self, data, what):
        as_postgres([f"{self.bin}/pg_ctl", "-D", data, "-l", data + ".log", "-w", "-t", "60", what])

    def url(self):
        return (f"postgres://postgres@127.0.0.1:{self.primary},127.0.0.1:{self.standby}/postgres"
                f"?target_session_attrs=read-write&schema={SCHEMA}")

    def remove(self):
        for name in ["primary", "standby"]:
            pids = cluster_pids(self.data(name))
            signal_all(pids, signal.SIGCONT)
            signal_all(pids, signal.SIGKILL)
        time.sleep(0.5)
        shutil.rmtree(self.dir, ignore_errors=True)


def count(port, sql):
    try:
        return int(psql(port, sql) or 0)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired):
        return None


PROCESSED = (f"SELECT (SELECT count(*) FROM {SCHEMA}.steps WHERE state = 'processed') + "
             f"(SELECT count(*) FROM {SCHEMA}.steps_history WHERE state = 'processed')")
TASKS = f"SELECT id || ' ' || task_key FROM {SCHEMA}.tasks UNION ALL SELECT id || ' ' || task_key FROM {SCHEMA}.tasks_history"


def ids(port):
    out = {}
    for line in psql(port, TASKS).splitlines():
        i, key = line.split(" ", 1)
        out[int(i)] = key
    return out


def wait_for(what, seconds, check):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError(f"waited {seconds} s for {what}")


LIVE = f"SELECT count(*) FROM {SCHEMA}.tasks WHERE state NOT IN ('completed', 'failed', 'compensated', 'cancelled', 'terminated')"


def finish(demo, port):
    """Waits for the demo's first run to end. A demo that waits for orders the promoted standby
    lost waits for ever: once nothing is left to run for 30 s, it is interrupted (SIGINT, as ^C)
    and reported as `hung`."""
    idle_since = None
    deadline = time.time() + 900
    while time.time() < deadline:
        try:
            return demo.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        if count(port, LIVE) == 0:
            idle_since = idle_since or time.time()
            if time.time() - idle_since > 30:
                demo.send_signal(signal.SIGINT)
                demo.wait(timeout=60)
                return "hung"
        else:
            idle_since = None
    demo.kill()
    raise RuntimeError("the demo's first run did not end within 900 s")


def one_round(binary, bin_dir, replication, orders, workdir):
    c = Clusters(bin_dir, replication == "sync")
    demo = [binary, "--db", c.url(), "--store-wait", "120s", "demo", "--orders", str(orders),
            "--schedulers", "3", "--concurrency", "64"]
    try:
        log = open(os.path.join(workdir, "demo-1.log"), "w")
        first = subprocess.Popen(demo, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        # Mid-run: a third of the orders' steps done.
        wait_for("a third of the steps", 300, lambda: (count(c.primary, PROCESSED) or 0) >= orders)
        if replication == "async":
            senders = [p for p in cluster_pids(c.data("primary"))
                       if "walsender" in open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace")]
            signal_all(senders, signal.SIGSTOP)
            cut = count(c.primary, PROCESSED)
            wait_for("work the standby does not have", 60,
                     lambda: (count(c.primary, PROCESSED) or 0) >= cut + orders // 2)
        before = ids(c.primary)
        signal_all(cluster_pids(c.data("primary")), signal.SIGKILL)
        done_before = count(c.standby, PROCESSED)
        c.pg_ctl(c.data("standby"), "promote")
        promoted = time.time()
        wait_for("a step completed after the promotion", 120,
                 lambda: (count(c.standby, PROCESSED) or 0) > done_before)
        first_step = time.time() - promoted
        after_promotion = ids(c.standby)
        lost = len(set(before) - set(after_promotion))
        first_exit = finish(first, c.standby)
        log.close()
        # Run again, as after a failover that may have lost commits: the orders again, under their keys.
        with open(os.path.join(workdir, "demo-2.log"), "w") as log2:
            second = subprocess.run(demo, stdout=log2, stderr=subprocess.STDOUT, cwd=workdir, timeout=900)
        text = open(os.path.join(workdir, "demo-2.log")).read()
        m = re.findall(r"effects applied twice (\d+)", text)
        twice = int(m[-1]) if m else None
        final = ids(c.standby)
        reissued = sum(1 for i, key in before.items() if i in final and final[i] != key)
        return {
            "first_run_exit": first_exit, "second_run_exit": second.returncode,
            "lost": lost, "reissued_ids": reissued, "applied_twice": twice,
            "first_step_s": round(first_step, 2), "tasks": len(final),
        }
    finally:
        c.remove()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(TARGET, "release", "shiftboss"))
    ap.add_argument("--replication", choices=["sync", "async"], default="async")
    ap.add_argument("--orders", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        sys.exit("needs PostgreSQL's server binaries (/usr/lib/postgresql/*/bin/initdb)")
    bin_dir = os.path.dirname(found[-1])
    for r in range(a.rounds):
        workdir = tempfile.mkdtemp(prefix="sb-failover-demo-")
        try:
            res = one_round(a.bin, bin_dir, a.replication, a.orders, workdir)
        except Exception:
            print(f"round {r + 1} failed; the demo's logs are in {workdir}", file=sys.stderr)
            raise
        print(f"failover ({a.replication}, {a.bin}) round {r + 1}: acknowledged tasks lost {res['lost']}, "
              f"task ids handed out again {res['reissued_ids']}, effects applied twice {res['applied_twice']}, "
              f"promotion to first step {res['first_step_s']} s, tasks {res['tasks']}, "
              f"demo exits {res['first_run_exit']}/{res['second_run_exit']}", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
