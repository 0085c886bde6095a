// graphile-worker 0.16 as a benchmark peer: N no-op jobs added in bulk (its add_jobs SQL
// function), then drained by one runner. Prints one JSON line.
// Usage: node graphile_worker_peer.mjs CONNECTION_STRING N SLOTS   (an empty database)
import { Logger, run, runMigrations } from "graphile-worker";
import pg from "pg";

const [connectionString, nArg, slotsArg] = process.argv.slice(2);
const n = Number(nArg);
// Its knob for jobs in flight: `concurrency`, the jobs run at once by the pool (each takes its own
// job with get_job; 0.16 has no batched fetch), set to the level every system runs at.
const CONCURRENCY = Number(slotsArg ?? 32);
// Each job in flight takes a connection for its get_job and its completion; the server allows 100
// (max_connections), and the bench's own client holds one.
const POOL = Math.min(CONCURRENCY + 2, 80);
const CHUNK = 10000;
// Its default logger prints a line per job; the bench keeps warnings and errors only.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(message);
});

await runMigrations({ connectionString, logger });
const client = new pg.Client({ connectionString });
await client.connect();
for (let i = 0; i < n; i += CHUNK) {
  const k = Math.min(CHUNK, n - i);
  await client.query(
    `select graphile_worker.add_jobs(array(
       select row('noop', '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec
       from generate_series(1, $1)))`,
    [k],
  );
}

const t0 = performance.now();
const runner = await run({
  connectionString,
  concurrency: CONCURRENCY,
  maxPoolSize: POOL,
  noHandleSignals: true,
  logger,
  pollInterval: 1000,
  taskList: { noop: async () => {} },
});
// Completed jobs are deleted: the drain ends when the table is empty.
for (;;) {
  const { rows } = await client.query("select count(*)::int as c from graphile_worker._private_jobs");
  if (rows[0].c === 0) break;
  await new Promise((r) => setTimeout(r, 20));
}
const drain = (performance.now() - t0) / 1000;
await runner.stop();
await client.end();
console.log(JSON.stringify({
  peer: "graphile-worker", db: "postgres", jobs: n, drain_s: drain, jobs_per_s: n / drain,
  knob: `concurrency ${CONCURRENCY} (jobs run at once), pool of ${POOL} connections`,
}));
