"""The markdown report of one run: the machine, every figure, the targets, and what was noisy."""
from .targets import check


def _f(v, fmt="{:,.0f}"):
    return "-" if v is None else fmt.format(v)


def _lat(d):
    if not d or not d.get("latency"):
        return "-"
    lat = d["latency"]
    return f"{lat['p50_ms']:.2f} / {lat['p99_ms']:.2f} / {lat['max_ms']:.2f}"


def _summary(d):
    """A latency summary as the lab prints it (p50_ms, p99_ms, max_ms at its top level)."""
    if not d or d.get("p50_ms") is None:
        return "-"
    return f"{d['p50_ms']:.2f} / {d['p99_ms']:.2f} / {d['max_ms']:.2f}"


def _g(d, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def throughput_items(r):
    """(label, jobs/s, kind) for the plot: every system at the highest level of the side-by-side run
    (shiftboss's own `jobs` figures where there was none), and the raw limits."""
    levels = sorted((r.get("side_by_side") or {}).items(), key=lambda kv: int(kv[0]))
    row = levels[-1][1] if levels else {}
    items = []
    for store in ("postgres", "sqlite"):
        v = _g(row, f"shiftboss-{store}", "jobs_per_s") or _g(r, store, "jobs", "jobs_per_s")
        items.append((f"shiftboss ({store})", v, "shiftboss"))
    for name, d in sorted(row.items()):
        if not name.startswith("shiftboss"):
            items.append((f"{name} ({d.get('db')})", d.get("jobs_per_s"), "peer"))
    items.append(("PG 1-row UPDATE, 1 client (tx/s)", _g(r, "raw", "pg_update_c1", "tps"), "raw"))
    items.append(("PG 1-row UPDATE, 8 clients (tx/s)", _g(r, "raw", "pg_update_c8", "tps"), "raw"))
    items.append(("SQLite 1-row commit, NORMAL (/s)", _g(r, "raw", "sqlite_normal", "commits_per_s"), "raw"))
    items.append(("SQLite 1-row commit, FULL (/s)", _g(r, "raw", "sqlite_full", "commits_per_s"), "raw"))
    return items


def side_by_side(r):
    """Issue 22's tables: one per level, every system with that many jobs in flight."""
    L = []
    levels = sorted((r.get("side_by_side") or {}).items(), key=lambda kv: int(kv[0]))
    if not levels:
        return L
    L += ["## Side by side: every system with the same jobs in flight", "",
          "Each system drains the same number of no-op jobs, enqueued in bulk, on its own fresh database of the same "
          "server (SQLite: a file on the same disk), with its own knob for jobs in flight set to the level; the "
          "column says how. The systems of one level run one after another, in the same minutes.", ""]
    for level, row in levels:
        sb = _g(row, "shiftboss-postgres", "jobs_per_s")
        L += [f"### {int(level):,} jobs in flight", "",
              "| system | store | jobs | jobs/s | drain s | shiftboss (PostgreSQL) / this | how its concurrency was set |",
              "|---|---|---:|---:|---:|---:|---|"]
        for name, d in sorted(row.items(), key=lambda kv: -(kv[1].get("jobs_per_s") or 0)):
            v = d.get("jobs_per_s")
            ratio = f"{sb / v:.2f}x" if sb and v else "-"
            system = "shiftboss" if name.startswith("shiftboss") else name
            L.append(f"| {system} | {d.get('db')} | {_f(d.get('jobs'))} | {_f(v)} | {_f(d.get('drain_s'), '{:.1f}')} | {ratio} | "
                     f"{d.get('knob', '-')} |")
        L.append("")
    return L


def write(r, path, plot_name):
    m = r["machine"]
    L = [f"# shiftboss benchmark: {r['started']}", ""]
    L += [f"Command: `{r['command']}` ({'smoke: tiny sizes, figures mean nothing' if r['smoke'] else 'full run'}); "
          f"{r['elapsed_s'] / 60:.1f} minutes.", ""]
    L += ["## Machine", "", "| | |", "|---|---|"]
    L += [f"| {k.replace('_', ' ')} | {v} |" for k, v in m.items()]
    L += [f"| load average at end | {r.get('load_average_at_end', '-')} |", ""]
    L += ["The machine is shared: other engineers' builds and test suites ran on the same 2 cores and the same",
          "PostgreSQL server during this run (see the load averages), so every figure carries that noise.", ""]

    L += ["## Throughput: one-step no-op jobs, enqueued in bulk, then drained", "",
          "Durable commits everywhere (PostgreSQL synchronous_commit "
          f"{m.get('postgres_synchronous_commit')}; SQLite FULL for shiftboss and for apalis-sqlite).", ""]
    if any(_g(r, store, "jobs") for store in ("postgres", "sqlite")):
        L += [f"shiftboss alone, {r['sizes']['jobs']:,} jobs at 2,048 in flight:", "",
              "| system | store | jobs/s | drain s |", "|---|---|---:|---:|"]
        for store in ("postgres", "sqlite"):
            d = _g(r, store, "jobs") or {}
            L.append(f"| shiftboss | {store} | {_f(d.get('jobs_per_s'))} | {_f(d.get('drain_s'), '{:.1f}')} |")
        L += [""]
    L += side_by_side(r)
    L += [f"![jobs per second]({plot_name})", ""]

    L += ["## Raw limits (same run)", "", "| limit | per second |", "|---|---:|",
          f"| PostgreSQL 1-row UPDATE transactions, pgbench, 1 client | {_f(_g(r, 'raw', 'pg_update_c1', 'tps'))} |",
          f"| PostgreSQL 1-row UPDATE transactions, pgbench, 8 clients | {_f(_g(r, 'raw', 'pg_update_c8', 'tps'))} |",
          f"| SQLite 1-row WAL commits, synchronous NORMAL (rusqlite) | "
          f"{_f(_g(r, 'raw', 'sqlite_normal', 'commits_per_s'))} |",
          f"| SQLite 1-row WAL commits, synchronous FULL (rusqlite) | {_f(_g(r, 'raw', 'sqlite_full', 'commits_per_s'))} |",
          ""]

    L += ["## shiftboss workloads", "", "| workload | SQLite | PostgreSQL |", "|---|---:|---:|"]

    def both(label, fn):
        L.append(f"| {label} | {fn(r.get('sqlite') or {})} | {fn(r.get('postgres') or {})} |")

    both("3-step order workflows/s, in-process no-op agents", lambda s: _f(_g(s, "flow", "workflows_per_s")))
    both("3-step order workflows/s, `demo --no-faults` (HTTP services + their ledger)",
         lambda s: _f(_g(s, "demo", "workflows_per_s")))
    both("pickup p50 / p99 / max ms, submit through the engine", lambda s: _lat(s.get("pickup_engine")))
    both("pickup p50 / p99 / max ms, submit through another store handle", lambda s: _lat(s.get("pickup_store")))
    both("recovery: complete-by to next start, p50 / p99 / max ms", lambda s: _lat(s.get("recovery")))
    both("idle serve: database transactions/s", lambda s: _f(_g(s, "idle", "xact_per_s"), "{:.2f}"))
    both("idle serve: peak RSS MB", lambda s: _f((_g(s, "idle", "vm_hwm_kb") or 0) / 1024 or None, "{:.1f}"))
    both("serve under load (jobs over HTTP): peak RSS MB",
         lambda s: _f((_g(s, "load", "vm_hwm_kb") or 0) / 1024 or None, "{:.1f}"))
    both("API submissions/s (`POST /v1/tasks`, keep-alive clients, `serve --roles api`)",
         lambda s: _f(_g(s, "api_submit", "submissions_per_s")))
    both("  API call p50 / p99 / max ms", lambda s: _lat(s.get("api_submit")))
    both("  serve peak RSS MB under that load", lambda s: _f((_g(s, "api_submit", "vm_hwm_kb") or 0) / 1024 or None,
                                                             "{:.1f}"))
    both("status channels: commit to receiver p50 / p99 / max ms, idle", lambda s: _lat({"latency": _g(s, "notify", "idle")}))
    both("  message to receiver p50 / p99 / max ms, during a drain", lambda s: _lat({"latency": _g(s, "notify", "under_load")}))
    both("  deliveries/s (3 per task, one subscription per task)", lambda s: _f(_g(s, "notify", "deliveries_per_s")))
    both("  no-op drain tasks/s without / writing a subscription's outbox per task / also delivering",
         lambda s: f"{_f(_g(s, 'notify', 'drain_without_per_s'))} / {_f(_g(s, 'notify', 'drain_with_per_s'))}"
                   f" / {_f(_g(s, 'notify', 'drain_delivering_per_s'))}")
    both("HTTP agent through serve to a fast sink, jobs/s: plain HTTP / HTTPS (store clock; wall clock)",
         lambda s: "-" if not s.get("agent_http") else
         f"{_f(_g(s, 'agent_http', 'http', 'jobs_per_s'))} / {_f(_g(s, 'agent_http', 'https', 'jobs_per_s'))} "
         f"({_f(_g(s, 'agent_http', 'http', 'jobs_per_s_wall'))} / {_f(_g(s, 'agent_http', 'https', 'jobs_per_s_wall'))})")
    for w in (1, 4):
        both(f"remote workers x{w} (Rust client, batch polls): steps/s",
             lambda s, w=w: _f(_g(s, f"remote_{w}", "steps_per_s")))
        both(f"  pickup of a waiting long poll, p50 / p99 / max ms (x{w})", lambda s, w=w: _summary(_g(s, f"remote_{w}", "pickup")))
        both(f"  its submission's own POST /v1/tasks, p50 / p99 / max ms (x{w})",
             lambda s, w=w: _summary(_g(s, f"remote_{w}", "submit")))
        both(f"Conductor-API workers x{w} (batch poll, an update per task): steps/s",
             lambda s, w=w: _f(_g(s, f"remote_conductor_{w}", "steps_per_s")))
    rec = _g(r, "postgres", "recovery") or _g(r, "sqlite", "recovery") or {}
    L += ["", f"Pickup: one job every {r['sizes']['pickup_every_ms']} ms for {r['sizes']['pickup_s']} s on an idle "
          f"store. Recovery: supervisor interval {rec.get('supervisor_interval_ms', '-')} ms, scheduler poll "
          f"{rec.get('poll_interval_ms', '-')} ms, step complete-by 1 s.", ""]

    sz = r["sizes"]
    L += ["## End to end: from the first submission to the last completion (issue 27)", "",
          f"{sz['flow']:,} three-step order workflows (in-process no-op agents) per line. Drain only: `flow`, whose "
          "store is filled in bulk before the engine starts, timed from the engine's start. End to end: "
          f"submitters beside the engine, either {sz.get('submit_clients', '-')} clients submitting one task per "
          f"call (PostgreSQL pool of {sz.get('submit_pool', '-')} connections, shared with the engine) or "
          f"{sz.get('batch_clients', '-')} clients submitting batches of {sz.get('batch', '-')} (`submit_tasks`). "
          "Submissions alone: the same clients with no engine running. Latency is per call (per batch).", "",
          "| figure | SQLite | PostgreSQL |", "|---|---:|---:|"]

    def ratio(s, key):
        e2e, drain = _g(s, key, "end_to_end_workflows_per_s"), _g(s, "flow", "workflows_per_s")
        return "-" if not (e2e and drain) else f"{e2e / drain:.2f}"

    both("drain only (pre-filled store), workflows/s", lambda s: _f(_g(s, "flow", "workflows_per_s")))
    both("end to end, single submissions, workflows/s", lambda s: _f(_g(s, "submit_single_e2e",
                                                                        "end_to_end_workflows_per_s")))
    both("  end to end / drain only", lambda s: ratio(s, "submit_single_e2e"))
    both("  submissions/s while the engine drains", lambda s: _f(_g(s, "submit_single_e2e", "submissions_per_s")))
    both("end to end, batch submissions, workflows/s", lambda s: _f(_g(s, "submit_batch_e2e",
                                                                       "end_to_end_workflows_per_s")))
    both("  end to end / drain only", lambda s: ratio(s, "submit_batch_e2e"))
    both("single submissions alone, submissions/s", lambda s: _f(_g(s, "submit_single", "submissions_per_s")))
    both("  submit call p50 / p99 / max ms", lambda s: _lat(s.get("submit_single")))
    both("batch submissions alone, tasks/s", lambda s: _f(_g(s, "submit_batch", "submissions_per_s")))
    both("  submit_tasks call p50 / p99 / max ms", lambda s: _lat(s.get("submit_batch")))
    L += [""]

    L += ["## Scale: claim, completion and sweep with finished records", "",
          "| store | finished records | where | claim p50 ms | complete p50 ms | sweep p50 ms |",
          "|---|---:|---|---:|---:|---:|"]
    for store in ("sqlite", "postgres"):
        for key, place in (("scale", "hot tables"), ("scale_history", "history")):
            for s in _g(r, store, key) or []:
                L.append(f"| {store} | {s['finished_records']:,} | {place} | {_f(_g(s, 'claim', 'p50_ms'), '{:.2f}')} | "
                         f"{_f(_g(s, 'complete', 'p50_ms'), '{:.2f}')} | {_f(_g(s, 'sweep', 'p50_ms'), '{:.2f}')} |")
    L += ["", f"Each: {r['sizes']['scale_rounds']} rounds of 100 jobs claimed at once, completed at once, then one "
          "sweep, after 3 rounds not counted. One store per level, filled, vacuumed and analyzed alike, all timed "
          "in one process round by round in turn, so that the machine's other load falls on every level alike. "
          "Finished records are one completed task and one processed step each: in the hot tables (a store "
          "whose archiver is off), or in history, where the archiver moves finished tasks after `[archive] after`.",
          ""]

    L += ["## Targets", "", "| target | figure | limit | verdict |", "|---|---|---|---|"]
    for t in check(r):
        L.append(f"| {t['target']} | {t['figure']} | {t['limit']} | {t['verdict']} |")
    if r.get("failures"):
        L += ["", "## Failures", ""] + [f"- {f}" for f in r["failures"]]
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
