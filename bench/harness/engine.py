"""The shiftboss side: build the product and the lab once, then run `shiftboss-lab bench WORKLOAD`
drivers, and the product's own `shiftboss demo` and `shiftboss serve`."""
import os

from .util import ROOT, last_json, log, run

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def build(release=True):
    """The release build for figures, the debug build for the smoke run. The lab is built without
    its default feature, crash injection, in the same cargo build as the product: the stores and
    the engine are then compiled once, as the product has them (an operator's `cargo build -p
    shiftboss`), and the benchmark drivers run the product's code paths, with no fault points.
    Returns the paths of `shiftboss` and `shiftboss-lab`."""
    profile = "release" if release else "debug"
    log(f"building shiftboss and shiftboss-lab ({profile})")
    flags = ["--release"] if release else []
    run(["nice", "-n", "10", "cargo", "build", *flags, "--locked", "-q", "-p", "shiftboss", "-p", "shiftboss-lab",
         "--no-default-features"], cwd=ROOT, env={"CARGO_TARGET_DIR": TARGET})
    return os.path.join(TARGET, profile, "shiftboss"), os.path.join(TARGET, profile, "shiftboss-lab")


class Shiftboss:
    def __init__(self, exes, workdir):
        self.exe, self.lab = exes
        self.workdir = workdir
        # The HTTP agent's sink (`agent_http.build_sink`), when the run measures it.
        self.sink = None

    def bench(self, db, *args, timeout=3600):
        """One workload on store `db` (a SQLite path or postgres URL with ?schema=); its JSON result."""
        out = run([self.lab, "--db", db, "bench", *map(str, args)], cwd=self.workdir, timeout=timeout)
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
