// A worker process that takes `slow` tasks and never answers, but extends their leases (the SDK's
// lease tracker): sdk_check.mjs kills it with SIGKILL while it holds one. Same environment as
// sdk_check.mjs.
import { OrkesClients, TaskHandler } from "@io-orkes/conductor-javascript";

const clients = await OrkesClients.from({
  serverUrl: process.env.CONDUCTOR_SERVER_URL,
  keyId: process.env.SHIFTBOSS_KEY_ID,
  keySecret: process.env.SHIFTBOSS_KEY_SECRET,
});
const handler = new TaskHandler({
  client: clients.getClient(), scanForDecorated: false,
  workers: [{ taskDefName: "slow", pollInterval: 50, leaseExtendEnabled: true, execute: () => new Promise(() => {}) }],
});
await handler.startWorkers();
