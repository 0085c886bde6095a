// Conductor's JavaScript SDK (@io-orkes/conductor-javascript, from npm) against shiftboss's
// Conductor API.
//
// Run by crates/shiftboss/tests/conductor_sdk.rs against a real `shiftboss serve` that declares the
// agent types `greet`, `shout` and `slow` remote. The SDK is used as a team on Conductor uses it,
// unchanged: a key and secret traded for a token, the metadata client registering task and
// workflow definitions, the workflow executor starting, reading, searching, pausing, resuming and
// terminating workflows, the worker runner (TaskHandler) completing tasks. A worker process
// (hang_worker.mjs) takes a task and is killed with SIGKILL while it holds it: the supervisor
// takes the step back when its lease lapses, another worker completes it, and the killed
// worker's update, sent late, is refused and changes nothing.
//
// Environment: CONDUCTOR_SERVER_URL (the serve's base URL), SHIFTBOSS_KEY_ID and
// SHIFTBOSS_KEY_SECRET (an API token's name and secret). Exits 0 when every check held; prints the
// first that did not and exits 1.

import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { OrkesClients, TaskHandler } from "@io-orkes/conductor-javascript";

const GREETING = "js_greeting";
const SLOW = "js_slow";
const DEADLINE_MS = 60_000;

function check(cond, what) {
  if (!cond) {
    console.log(`FAILED: ${what}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, probe, deadline = DEADLINE_MS) {
  const end = Date.now() + deadline;
  while (Date.now() < end) {
    const v = await probe();
    if (v) return v;
    await sleep(50);
  }
  check(false, `${what} within ${deadline / 1000}s`);
}

/** What a call that must fail threw (its message), or null when it succeeded. */
async function refused(call) {
  try {
    await call();
    return null;
  } catch (e) {
    return String(e.message ?? e);
  }
}

async function register(metadata, workflows) {
  await metadata.registerTasks([
    { name: "greet", retryCount: 2, timeoutSeconds: 60, responseTimeoutSeconds: 30, ownerEmail: "ops@example.com" },
    { name: "shout", retryCount: 2, timeoutSeconds: 60, responseTimeoutSeconds: 30, ownerEmail: "ops@example.com" },
    // A short response window, retried at once: a claim that goes unanswered lapses in two
    // seconds, unless its worker extends its lease.
    {
      name: "slow", retryCount: 5, timeoutSeconds: 60, timeoutPolicy: "RETRY", responseTimeoutSeconds: 2,
      retryLogic: "FIXED", retryDelaySeconds: 0, ownerEmail: "ops@example.com",
    },
  ]);
  check((await metadata.getTask("slow")).responseTimeoutSeconds === 2, "the task definition reads back");
  await workflows.registerWorkflow(true, {
    name: GREETING, version: 1, description: "greet, then shout", timeoutSeconds: 0,
    tasks: [
      { name: "greet", taskReferenceName: "greet_ref", type: "SIMPLE", inputParameters: { name: "${workflow.input.name}" } },
      { name: "shout", taskReferenceName: "shout_ref", type: "SIMPLE", inputParameters: { text: "${greet_ref.output.greeting}" } },
    ],
    outputParameters: { message: "${shout_ref.output.message}" },
  });
  await metadata.registerWorkflowDef({
    name: SLOW, version: 1, timeoutSeconds: 0,
    tasks: [{ name: "slow", taskReferenceName: "slow_ref", type: "SIMPLE", inputParameters: { n: "${workflow.input.n}" } }],
  }, true);
  const got = await metadata.getWorkflowDef(GREETING, 1);
  check(got.name === GREETING && got.tasks.map((t) => t.taskReferenceName).join() === "greet_ref,shout_ref",
    "the workflow definition reads back");
  const names = new Set((await metadata.getAllWorkflowDefs()).map((w) => w.name));
  check(names.has(GREETING) && names.has(SLOW), "both workflow definitions are listed");
}

/** A worker process takes the slow task, keeps it past its response window with the SDK's lease
 * extensions, and is killed while it holds it. */
async function killedWorkerRecovered(workflows, client) {
  const wf = await workflows.startWorkflow({ name: SLOW, version: 1, input: { n: 1 } });
  const hang = spawn(process.execPath, [fileURLToPath(new URL("./hang_worker.mjs", import.meta.url))], {
    env: process.env, stdio: ["ignore", "inherit", "inherit"],
  });
  // Never left behind, also when a check fails.
  process.once("exit", () => hang.kill("SIGKILL"));
  const held = await waitFor("the worker process holds the slow task", async () => {
    const t = (await workflows.getWorkflow(wf, true)).tasks?.[0];
    return t && t.status === "IN_PROGRESS" && t;
  });
  check(typeof held.workerId === "string" && held.workerId.length > 0, `the task names the worker that holds it (${held.workerId})`);
  // The worker's lease tracker extends the lease (extendLease): still held past its first
  // complete-by, under the same claim.
  await sleep(5_000);
  const still = (await workflows.getWorkflow(wf, true)).tasks?.[0];
  check(still.status === "IN_PROGRESS" && still.taskId === held.taskId,
    `the task is still held 5 s later, past its 2 s response window (${still.status}, ${still.taskId})`);
  hang.kill("SIGKILL");
  await new Promise((r) => hang.once("exit", r));
  // The lease lapses after a second; the supervisor takes the step back and this worker gets it.
  const handler = new TaskHandler({
    client, scanForDecorated: false,
    workers: [{ taskDefName: "slow", pollInterval: 50, execute: async () => ({ status: "COMPLETED", outputData: { who: "current" } }) }],
  });
  await handler.startWorkers();
  let done;
  try {
    done = await waitFor("the slow workflow completes after its worker was killed", async () => {
      const w = await workflows.getWorkflow(wf, true);
      return w.status === "COMPLETED" && w;
    }, 30_000);
  } finally {
    await handler.stopWorkers();
  }
  check(JSON.stringify(done.output) === JSON.stringify({ who: "current" }), `the workflow's output is the new claim's: ${JSON.stringify(done.output)}`);
  const last = done.tasks[done.tasks.length - 1];
  check(last.taskId !== held.taskId && last.pollCount > held.pollCount, "the retried claim has a new taskId and more polls");
  // The killed worker's update, arriving late: refused (409 lease_lost; this SDK keeps only the
  // answer's message), and nothing changes.
  const why = await refused(() => workflows.updateTask(held.taskId, wf, "COMPLETED", { who: "late" }));
  check(why !== null && why.includes("lapsed"), `the killed worker's late update is refused: ${why}`);
  const after = await workflows.getWorkflow(wf, true);
  check(after.status === "COMPLETED" && after.output.who === "current", "the late update changed nothing");
}

async function main() {
  const clients = await OrkesClients.from({
    serverUrl: process.env.CONDUCTOR_SERVER_URL,
    keyId: process.env.SHIFTBOSS_KEY_ID,
    keySecret: process.env.SHIFTBOSS_KEY_SECRET,
  });
  const metadata = clients.getMetadataClient();
  const workflows = clients.getWorkflowClient();
  const client = clients.getClient();

  await register(metadata, workflows);
  await killedWorkerRecovered(workflows, client);

  // Started before any worker runs: they wait as SCHEDULED.
  const ids = new Map();
  for (let i = 0; i < 5; i++) {
    const id = await workflows.startWorkflow({
      name: GREETING, version: 1, input: { name: `n${i}` }, correlationId: `corr-${i}`, priority: i,
      idempotencyKey: `js-greet-${i}`,
    });
    ids.set(id, `n${i}`);
  }
  const again = await workflows.startWorkflow({
    name: GREETING, version: 1, input: { name: "n0" }, idempotencyKey: "js-greet-0", idempotencyStrategy: "RETURN_EXISTING",
  });
  check(ids.get(again) === "n0", "starting again with the same idempotency key gives the same id");
  const first = await workflows.getWorkflow(again, true);
  check(first.status === "RUNNING" && first.tasks[0].status === "SCHEDULED" && first.tasks[0].referenceTaskName === "greet_ref",
    "a started workflow is RUNNING with its first task SCHEDULED");

  const tasks = clients.getTaskClient();
  const sizes = await tasks.getQueueSizeForTask(["greet", "shout"]);
  check(sizes.greet === 5 && sizes.shout === 0, `the queue sizes count the waiting tasks: ${JSON.stringify(sizes)}`);

  const handler = new TaskHandler({
    client, scanForDecorated: false,
    workers: [
      { taskDefName: "greet", pollInterval: 50, concurrency: 2,
        execute: async (t) => ({ status: "COMPLETED", outputData: { greeting: `hello ${t.inputData.name}` } }) },
      { taskDefName: "shout", pollInterval: 50,
        execute: async (t) => ({ status: "COMPLETED", outputData: { message: `${t.inputData.text.toUpperCase()}!` } }) },
    ],
  });
  await handler.startWorkers();
  try {
    for (const [wf, name] of ids) {
      const done = await waitFor(`workflow ${wf} completes`, async () => {
        const w = await workflows.getWorkflow(wf, true);
        return w.status === "COMPLETED" && w;
      });
      check(done.output.message === `HELLO ${name.toUpperCase()}!`, `workflow ${wf}'s output: ${JSON.stringify(done.output)}`);
      check(done.tasks.map((t) => t.status).join() === "COMPLETED,COMPLETED", `workflow ${wf}'s tasks completed`);
    }
  } finally {
    await handler.stopWorkers();
  }

  const polls = await tasks.getTaskPollData("greet");
  check(polls.length > 0 && polls.every((p) => p.queueName === "greet" && p.workerId && p.lastPollTime > 0),
    `the poll data names the workers that polled: ${JSON.stringify(polls)}`);
  check(JSON.stringify(await tasks.getQueueSizeForTask(["greet"])) === JSON.stringify({ greet: 0 }),
    "the greet queue is empty once its tasks are done");

  const found = await workflows.search(0, 100, `workflowType = ${GREETING} AND status = COMPLETED`, "*");
  const hits = new Map((found.results ?? []).map((r) => [r.workflowId, r]));
  check([...ids.keys()].every((id) => hits.get(id)?.status === "COMPLETED" && hits.get(id)?.workflowType === GREETING),
    `search finds the completed workflows (${hits.size} results, totalHits ${found.totalHits})`);

  // Pause, resume and terminate one that no worker serves now.
  const wf = await workflows.startWorkflow({ name: SLOW, version: 1, input: { n: 2 } });
  await workflows.pause(wf);
  check((await workflows.getWorkflow(wf, false)).status === "PAUSED", "a paused workflow reads PAUSED");
  await workflows.resume(wf);
  await workflows.terminate(wf, "sdk check");
  check((await workflows.getWorkflow(wf, true)).status === "TERMINATED", "a terminated workflow reads TERMINATED");
  console.log("all checks held");
  // The SDK keeps a token refresh timer and pooled connections open: end here.
  process.exit(0);
}

main().catch((e) => {
  console.log(`FAILED: ${e.stack ?? e}`);
  process.exit(1);
});
