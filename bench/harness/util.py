"""Running commands and reading their one-line JSON results."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, cwd=None, env=None, timeout=None, check=True):
    """Runs a command; returns its stdout. Its stderr passes through, so progress stays visible."""
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run(cmd, cwd=cwd, env=full_env, timeout=timeout, stdout=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited with {p.returncode}")
    return p.stdout


def last_json(text):
    """The last line of `text` that is a JSON object: drivers print their result last."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON result in output: {text[-300:]!r}")


def attempt(results, name, fn):
    """Runs one measurement; a failure is recorded in the results instead of ending the run."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001: any failure of one workload must not lose the others
        log(f"{name} FAILED: {e}")
        results.setdefault("failures", []).append(f"{name}: {e}")
        return None
