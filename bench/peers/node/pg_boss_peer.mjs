// pg-boss 10 as a benchmark peer: N no-op jobs inserted in bulk (boss.insert), then drained by
// workers that fetch and complete in batches. Prints one JSON line.
// Usage: node pg_boss_peer.mjs CONNECTION_STRING N SLOTS   (an empty database)
import PgBoss from "pg-boss";

const [connectionString, nArg, slotsArg] = process.argv.slice(2);
const n = Number(nArg);
const SLOTS = Number(slotsArg ?? 2000);
// Its documented knobs for throughput in v10: several work() loops, each fetching batchSize jobs
// and holding them until its handler has run them all (so the jobs in flight are loops x batch,
// set to the level every system runs at), and the shortest polling interval it allows.
const WORKERS = 4;
const BATCH = Math.max(1, Math.floor(SLOTS / WORKERS));
const CHUNK = 10000;

const boss = new PgBoss({ connectionString, max: WORKERS + 4, supervise: false, schedule: false });
boss.on("error", (e) => console.error(e));
await boss.start();
await boss.createQueue("noop");
for (let i = 0; i < n; i += CHUNK) {
  const k = Math.min(CHUNK, n - i);
  await boss.insert(Array.from({ length: k }, () => ({ name: "noop", data: {} })));
}

const t0 = performance.now();
for (let w = 0; w < WORKERS; w++) {
  await boss.work("noop", { batchSize: BATCH, pollingIntervalSeconds: 0.5 }, async () => {});
}
const db = boss.getDb();
for (;;) {
  const { rows } = await db.executeSql("select count(*)::int as c from pgboss.job where name = 'noop' and state = 'completed'");
  if (rows[0].c >= n) break;
  await new Promise((r) => setTimeout(r, 20));
}
const drain = (performance.now() - t0) / 1000;
await boss.stop({ graceful: false, wait: false });
console.log(JSON.stringify({
  peer: "pg-boss", db: "postgres", jobs: n, drain_s: drain, jobs_per_s: n / drain,
  knob: `${WORKERS} work() loops x batchSize ${BATCH} (jobs fetched and held per loop)`,
}));
process.exit(0);
