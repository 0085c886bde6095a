"""The peers, installed by package name from their registries (crates.io, npm, PyPI) from the
manifests under bench/peers/, each run against its own database with the same no-op job, and with its
own knob for jobs in flight set to the level every system of the comparison runs at (`slots`); each
prints what it set as `knob`."""
import os
import sys

from .util import ROOT, last_json, log, run

PEERS = os.path.join(ROOT, "bench", "peers")
VENV = os.path.join(ROOT, "bench", ".venv")
APALIS_TARGET = os.environ.get("APALIS_TARGET_DIR", "/work/target-bench-apalis")


def install():
    """Installs or builds every peer once; later runs reuse what is there."""
    node = os.path.join(PEERS, "node")
    if not os.path.isdir(os.path.join(node, "node_modules")):
        log("installing graphile-worker and pg-boss from npm")
        run(["npm", "ci", "--no-audit", "--no-fund"], cwd=node)
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        log("creating bench/.venv")
        run([sys.executable, "-m", "venv", VENV])
    log("installing pgqueuer and procrastinate from PyPI (if missing)")
    run([os.path.join(VENV, "bin", "pip"), "install", "-q", "-r", os.path.join(PEERS, "python", "requirements.txt")])
    log("building apalis (release, own target dir; slow the first time)")
    run(["nice", "-n", "10", "cargo", "build", "--release", "--locked", "-q"], cwd=os.path.join(PEERS, "apalis"),
        env={"CARGO_TARGET_DIR": APALIS_TARGET})


def apalis(db, jobs, slots):
    return last_json(run([os.path.join(APALIS_TARGET, "release", "apalis-peer"), db, str(jobs), str(slots)],
                         timeout=3600))


def graphile_worker(db_url, jobs, slots):
    return last_json(run(["node", "graphile_worker_peer.mjs", db_url, str(jobs), str(slots)],
                         cwd=os.path.join(PEERS, "node"), timeout=3600))


def pg_boss(db_url, jobs, slots):
    return last_json(run(["node", "pg_boss_peer.mjs", db_url, str(jobs), str(slots)], cwd=os.path.join(PEERS, "node"),
                         timeout=3600))


def pgqueuer(db_url, jobs, slots):
    return last_json(run([os.path.join(VENV, "bin", "python"), os.path.join(PEERS, "python", "pgqueuer_peer.py"),
                          db_url, str(jobs), str(slots)], timeout=3600))


def procrastinate(db_url, jobs, slots):
    return last_json(run([os.path.join(VENV, "bin", "python"), os.path.join(PEERS, "python", "procrastinate_peer.py"),
                          db_url, str(jobs), str(slots)], timeout=3600))
