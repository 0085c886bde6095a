#!/usr/bin/env python3
"""The HTTP agent's cost per job through `shiftboss serve` (issue 19), alone: what `bench/run`
measures in its section "Outbound calls" (`bench/harness/agent_http.py` says how).

Build first (the release build of bench/run):
    cargo build --release --locked -p shiftboss -p shiftboss-lab --no-default-features
Then: python3 bench/agent_http.py [JOBS] (default 20000; --pg URL as bench/run's default; serve's
--concurrency from SERVE_CONCURRENCY, else its default). Prints one JSON line per mode."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import agent_http  # noqa: E402


def main():
    args = sys.argv[1:]
    pg = os.environ.get("SHIFTBOSS_TEST_PG", "postgres://postgres@127.0.0.1:5432/test")
    if "--pg" in args:
        i = args.index("--pg")
        pg = args[i + 1]
        del args[i:i + 2]
    jobs = int(args[0]) if args else 20000
    release = os.path.join(agent_http.TARGET, "release")
    sink = agent_http.build_sink()
    r = agent_http.measure(os.path.join(release, "shiftboss"), os.path.join(release, "shiftboss-lab"), sink, pg, jobs,
                           os.environ.get("SERVE_CONCURRENCY") or None)
    for d in r.values():
        print(json.dumps(d), flush=True)


if __name__ == "__main__":
    main()
