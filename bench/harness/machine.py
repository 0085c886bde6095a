"""What the figures were measured on: the machine, the database servers and their durability."""
import os
import platform
import sqlite3

from .util import run


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def describe(pg, workdir):
    disk = run(["df", "-h", workdir]).strip().splitlines()[-1].split()
    return {
        "cpu": _cpu(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "kernel": platform.release(),
        "disk": f"{disk[0]} ({disk[1]}, {disk[3]} free)",
        "load_average_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "postgres": pg.sql("SELECT version()").split(" on ")[0],
        "postgres_synchronous_commit": pg.setting("synchronous_commit"),
        "postgres_fsync": pg.setting("fsync"),
        "postgres_shared_buffers": pg.setting("shared_buffers"),
        "sqlite_python": sqlite3.sqlite_version,
        "shiftboss_sqlite_synchronous": "FULL (the store's default, Durability::Full)",
        "rustc": run(["rustc", "--version"]).strip(),
        "node": run(["node", "--version"]).strip(),
    }
