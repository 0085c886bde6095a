"""Issue 6's, 16's and 27's targets, as ratios of figures from the same run. Each check says what it compared and
whether it held; a figure that was not measured gives "not measured", never a pass."""


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def _row(name, figure, limit, ok):
    return {"target": name, "figure": figure, "limit": limit,
            "verdict": "not measured" if ok is None else ("met" if ok else "missed")}


def check(r):
    rows = []
    pg_jobs = _get(r, "postgres", "jobs", "jobs_per_s")
    lite_jobs = _get(r, "sqlite", "jobs", "jobs_per_s")
    c8 = _get(r, "raw", "pg_update_c8", "tps")
    # Issue 22: at each level, every system with the same jobs in flight.
    for level, row in sorted((r.get("side_by_side") or {}).items(), key=lambda kv: int(kv[0])):
        sb = _get(row, "shiftboss-postgres", "jobs_per_s")
        peers = {k: v.get("jobs_per_s") for k, v in row.items()
                 if not k.startswith("shiftboss") and v and v.get("db") == "postgres" and v.get("jobs_per_s")}
        fastest = max(peers.items(), key=lambda kv: kv[1]) if peers else None
        ok = None if not (sb and fastest) else sb / fastest[1] >= 2.0
        rows.append(_row(f"PostgreSQL jobs/s >= 2x the fastest peer, all at {int(level):,} in flight",
                         f"{sb / fastest[1]:.2f}x ({fastest[0]})" if ok is not None else "-", ">= 2.0x", ok))
        ok = None if not (sb and c8) else sb / c8 >= 2.0
        rows.append(_row(f"PostgreSQL jobs/s >= 2x raw 1-row UPDATE tps at 8 clients, at {int(level):,} in flight",
                         f"{sb / c8:.2f}x" if ok is not None else "-", ">= 2.0x", ok))
    ok = None if not (pg_jobs and c8) else pg_jobs / c8 >= 1.0
    rows.append(_row("PostgreSQL jobs/s >= raw 1-row UPDATE tps at 8 clients",
                     f"{pg_jobs / c8:.2f}x" if ok is not None else "-", ">= 1.0x", ok))
    normal = _get(r, "raw", "sqlite_normal", "commits_per_s")
    ok = None if not (lite_jobs and normal) else lite_jobs / normal >= 0.5
    rows.append(_row("SQLite jobs/s >= 0.5x raw 1-row commits/s (NORMAL)",
                     f"{lite_jobs / normal:.2f}x" if ok is not None else "-", ">= 0.5x", ok))
    for store in ("sqlite", "postgres"):
        for via in ("engine", "store"):
            lat = _get(r, store, f"pickup_{via}", "latency")
            ok = None if not lat else (lat["p50_ms"] <= 1.0 and lat["p99_ms"] <= 5.0)
            fig = f"p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms" if lat else "-"
            rows.append(_row(f"pickup on {store} (submit via {via})", fig, "p50 <= 1 ms, p99 <= 5 ms", ok))
    for store in ("sqlite", "postgres"):
        rec = _get(r, store, "recovery")
        if rec:
            limit = rec["supervisor_interval_ms"] + 100
            rows.append(_row(f"recovery on {store}", f"max {rec['latency']['max_ms']:.0f} ms "
                             f"(p50 {rec['latency']['p50_ms']:.0f})", f"<= {limit} ms",
                             rec["latency"]["max_ms"] <= limit))
        else:
            rows.append(_row(f"recovery on {store}", "-", "interval + 100 ms", None))
    for store in ("sqlite", "postgres"):
        for key, place in (("scale", "hot tables"), ("scale_history", "history")):
            sc = _get(r, store, key) or []
            if len(sc) >= 2 and sc[0]["claim"] and sc[-1]["claim"]:
                a, b = sc[0]["claim"]["p50_ms"], sc[-1]["claim"]["p50_ms"]
                change = (b - a) / a
                rows.append(_row(f"claim cost flat on {store}, 0 to {sc[-1]['finished_records']:,} finished in {place}",
                                 f"{a:.2f} -> {b:.2f} ms ({change:+.0%})", "within +-10%", abs(change) <= 0.10))
            else:
                rows.append(_row(f"claim cost flat on {store} ({place})", "-", "within +-10%", None))
    # Issue 27: submissions, and end to end against the drain of the same run.
    single = _get(r, "postgres", "submit_single")
    if single:
        rate, p99 = single["submissions_per_s"], single["latency"]["p99_ms"]
        rows.append(_row(f"PostgreSQL single submissions ({single['clients']} clients)", f"{rate:,.0f}/s, p99 {p99:.1f} ms",
                         ">= 5,000/s, p99 <= 20 ms", rate >= 5000 and p99 <= 20))
    else:
        rows.append(_row("PostgreSQL single submissions (64 clients)", "-", ">= 5,000/s, p99 <= 20 ms", None))
    rate = _get(r, "postgres", "submit_batch", "submissions_per_s")
    rows.append(_row("PostgreSQL batch submissions", f"{rate:,.0f} tasks/s" if rate else "-", ">= 20,000 tasks/s",
                     None if not rate else rate >= 20000))
    drain = _get(r, "postgres", "flow", "workflows_per_s")
    for key, how in (("submit_single_e2e", "single"), ("submit_batch_e2e", "batch")):
        e2e = _get(r, "postgres", key, "end_to_end_workflows_per_s")
        ok = None if not (e2e and drain) else e2e / drain >= 0.8
        rows.append(_row(f"PostgreSQL end to end ({how} submissions) >= 0.8x drain only",
                         f"{e2e / drain:.2f}x ({e2e:,.0f} vs {drain:,.0f}/s)" if ok is not None else "-",
                         ">= 0.8x", ok))
    best = max([v for v in (_get(r, "sqlite", k, "end_to_end_workflows_per_s")
                            for k in ("submit_single_e2e", "submit_batch_e2e")) if v] or [0]) or None
    rows.append(_row("SQLite end to end, three-step workflows/s (best of single and batch)",
                     f"{best:,.0f}/s" if best else "-", ">= 10,000/s", None if not best else best >= 10000))
    # Issue 16: submissions through the HTTP API.
    for store, want in (("sqlite", 10000), ("postgres", 5000)):
        api = _get(r, store, "api_submit")
        if api:
            rate, p99, mb = api["submissions_per_s"], api["latency"]["p99_ms"], (api.get("vm_hwm_kb") or 0) / 1024
            rows.append(_row(f"API submissions on {store} ({api['clients']} clients)",
                             f"{rate:,.0f}/s, p99 {p99:.1f} ms, serve {mb:.0f} MB",
                             f">= {want:,}/s, p99 <= 20 ms, RSS <= 100 MB", rate >= want and p99 <= 20 and mb <= 100))
        else:
            rows.append(_row(f"API submissions on {store}", "-", f">= {want:,}/s, p99 <= 20 ms, RSS <= 100 MB", None))
    # Issue 19: the HTTP agent through serve, against the in-process drain of the same run.
    for mode, want in (("http", 10000), ("https", 8000)):
        v = _get(r, "postgres", "agent_http", mode, "jobs_per_s")
        rows.append(_row(f"PostgreSQL jobs/s through serve and the HTTP agent over {mode.upper()}",
                         f"{v:,.0f}/s" if v else "-", f">= {want:,}/s", None if not v else v >= want))
    # Issue 17: remote workers on PostgreSQL (native protocol).
    best = max([v for v in (_get(r, "postgres", f"remote_{w}", "steps_per_s") for w in (1, 4)) if v] or [0]) or None
    rows.append(_row("PostgreSQL remote workers, steps/s (best of 1 and 4 processes)",
                     f"{best:,.0f}/s" if best else "-", ">= 10,000/s", None if not best else best >= 10000))
    best = max([v for v in (_get(r, "postgres", f"remote_conductor_{w}", "steps_per_s") for w in (1, 4)) if v] or [0]) or None
    rows.append(_row("PostgreSQL Conductor batch-poll workers, steps/s (best of 1 and 4 processes)",
                     f"{best:,.0f}/s" if best else "-", ">= 5,000/s", None if not best else best >= 5000))
    p99s = [v for v in (_get(r, "postgres", f"remote_{w}", "pickup", "p99_ms") for w in (1, 4)) if v is not None]
    rows.append(_row("PostgreSQL remote pickup p99 (waiting long poll)", f"{max(p99s):.1f} ms" if p99s else "-",
                     "<= 5 ms", None if not p99s else max(p99s) <= 5))
    # Issue 18: status channels.
    for store in ("sqlite", "postgres"):
        lat = _get(r, store, "notify", "idle")
        rows.append(_row(f"status channel, commit to receiver p99, idle ({store})",
                         f"{lat['p99_ms']:.1f} ms" if lat else "-", "<= 50 ms", None if not lat else lat["p99_ms"] <= 50))
        ratio = _get(r, store, "notify", "ratio")
        rows.append(_row(f"no-op drain writing a subscription's outbox per task / without ({store})",
                         f"{ratio:.2f}x" if ratio else "-", ">= 0.7x", None if not ratio else ratio >= 0.7))
        ratio = _get(r, store, "notify", "ratio_delivering")
        rows.append(_row(f"  the same drain while its process also delivers / without ({store})",
                         f"{ratio:.2f}x" if ratio else "-", ">= 0.7x", None if not ratio else ratio >= 0.7))
    idle = _get(r, "postgres", "idle", "xact_per_s")
    rows.append(_row("idle load of one serve (PostgreSQL)", f"{idle:.2f} xact/s" if idle is not None else "-",
                     "<= 1 xact/s", None if idle is None else idle <= 1.0))
    for store in ("sqlite", "postgres"):
        kb = _get(r, store, "idle", "vm_hwm_kb")
        rows.append(_row(f"idle serve peak RSS ({store})", f"{kb / 1024:.1f} MB" if kb else "-", "<= 50 MB",
                         None if not kb else kb / 1024 <= 50))
    return rows
