"""The shiftboss side: build the binary once, then run `shiftboss bench WORKLOAD` drivers."""
import os

from .util import ROOT, last_json, log, run

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def build(release=True):
    """The release build for figures; the smoke run takes the debug build CI has already made."""
    profile = "release" if release else "debug"
    log(f"building shiftboss ({profile})")
    flags = ["--release"] if release else []
    run(["nice", "-n", "10", "cargo", "build", *flags, "--locked", "-q", "-p", "shiftboss"], cwd=ROOT,
        env={"CARGO_TARGET_DIR": TARGET})
    return os.path.join(TARGET, profile, "shiftboss")


class Shiftboss:
    def __init__(self, exe, workdir):
        self.exe = exe
        self.workdir = workdir

    def bench(self, db, *args, timeout=3600):
        """One workload on store `db` (a SQLite path or postgres URL with ?schema=); its JSON result."""
        out = run([self.exe, "--db", db, "bench", *map(str, args)], cwd=self.workdir, timeout=timeout)
        return last_json(out)

    def demo(self, db, orders, timeout=3600):
        """The demo itself with --no-faults: the order workflow through its real HTTP services.
        Workflows per second come from its own summary (orders / elapsed)."""
        out = run([self.exe, "--db", db, "demo", "--no-faults", "--orders", str(orders)], cwd=self.workdir,
                  timeout=timeout)
        elapsed = None
        for line in out.splitlines():
            if line.strip().startswith("elapsed"):
                elapsed = float(line.split()[1])
        if not elapsed:
            raise ValueError(f"no elapsed line in the demo's summary: {out[-400:]!r}")
        return {"workload": "demo", "workflows": orders, "elapsed_s": elapsed, "workflows_per_s": orders / elapsed}
