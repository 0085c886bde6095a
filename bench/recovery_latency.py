#!/usr/bin/env python3
"""Time from a step's complete-by to its next claim, for every lease expiry in a SQLite state store.

Usage: python3 bench/recovery_latency.py shiftboss.db
Reads the event log only (step.claimed carries lease_token and complete_by; step.expired the
lease_token that lapsed); changes nothing.
"""
import json
import sqlite3
import sys


def pct(values, p):
    return values[min(len(values) - 1, int(p * len(values)))]


def main(path):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    claims = {}
    for step, at, detail in c.execute("SELECT step_id, at, detail FROM events WHERE kind = 'step.claimed'"):
        d = json.loads(detail)
        claims[(step, d["lease_token"])] = (at, d["complete_by"])
    found, rerun = [], []
    for step, at, detail in c.execute("SELECT step_id, at, detail FROM events WHERE kind = 'step.expired'"):
        token = json.loads(detail)["lease_token"]
        complete_by = claims[(step, token)][1]
        found.append(at - complete_by)
        nxt = claims.get((step, token + 1))
        if nxt:
            rerun.append(nxt[0] - complete_by)
    if not rerun:
        print("no lease expiries followed by a new claim in", path)
        return
    found.sort()
    rerun.sort()
    print(f"lease expiries: {len(found)} ({len(rerun)} claimed again)")
    print(f"complete-by -> expiry found: p50 {pct(found, .5)} ms, p99 {pct(found, .99)} ms, max {found[-1]} ms")
    print(f"complete-by -> next claim:   p50 {pct(rerun, .5)} ms, p99 {pct(rerun, .99)} ms, max {rerun[-1]} ms")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
