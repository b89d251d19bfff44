// The TypeScript SDK's examples, run from the installed tarball against a running node: what
// scripts/sdk-package runs in a new npm project that installed only the packed tarball (and the
// compiler and Node's types to build the examples, compiled to build/examples/ beside this file).
//
//     node run.mjs NODE_URL
//
// Each example runs as a user would run it (quickstart and worker as programs, the Lambda handler
// imported and called with function URL events), in a namespace of its own; the outcome is read
// back from the node. Exits 1, naming the example and what went wrong, at the first failure.

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { realpathSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@hourglass/client";

const here = dirname(fileURLToPath(import.meta.url));
const examples = join(here, "build", "examples");
const url = process.argv[2];

function fail(example, why) {
  console.error(`sdk-package: typescript example ${example}: ${why}`);
  process.exit(1);
}

const namespace = () => `pkg-${randomUUID().slice(0, 12)}`;

function envFor(ns, extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("HOURGLASS_")) env[k] = v;
  return { ...env, HOURGLASS_URL: url, HOURGLASS_NAMESPACE: ns, ...extra };
}

/** Starts `node file`, collecting its output; `exited` resolves with its exit code. */
function start(file, env) {
  const child = spawn(process.execPath, [join(examples, file)], { env, stdio: ["ignore", "pipe", "pipe"] });
  const run = { child, output: "" };
  child.stdout.on("data", (c) => (run.output += c.toString()));
  child.stderr.on("data", (c) => (run.output += c.toString()));
  run.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
  return run;
}

async function within(seconds, probe) {
  const deadline = Date.now() + seconds * 1000;
  while (!(await probe())) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

async function quickstart() {
  const ns = namespace();
  const run = start("quickstart.js", envFor(ns));
  const code = await run.exited;
  if (code !== 0) fail("quickstart", `exited ${code}:\n${run.output}`);
  const jobs = new Map((await new Client(url, { namespace: ns }).listJobs()).jobs.map((j) => [j.type, j]));
  const reminder = jobs.get("reminder.flight");
  const digest = jobs.get("digest.send");
  if (reminder?.state !== "cancelled") fail("quickstart", `no cancelled reminder.flight job:\n${run.output}`);
  if (digest?.key !== "digest-acme" || digest.state !== "active") fail("quickstart", `no active digest.send job with key digest-acme:\n${run.output}`);
  for (const expected of [`cancelled ${reminder.id}: cancelled`, "refused as expected: unknown_timezone at schedule.timezone"]) {
    if (!run.output.includes(expected)) fail("quickstart", `no line ${JSON.stringify(expected)} in its output:\n${run.output}`);
  }
}

async function worker() {
  const ns = namespace();
  const client = new Client(url, { namespace: ns });
  const run = start("worker.js", envFor(ns, { HOURGLASS_QUEUE: "tasks" }));
  try {
    const report = await client.createJob({
      schedule: { after: "10ms" },
      target: { queue: "tasks" },
      type: "task",
      payload: { action: "report.generate", seconds: 0.05 },
    });
    const email = await client.createJob({
      schedule: { after: "10ms" },
      target: { queue: "tasks" },
      type: "email.send",
      payload: { to: "ada@example.com" },
    });
    const wanted = [`done report.generate ${report.id}`, "email to ada@example.com"];
    if (!(await within(30, () => wanted.every((w) => run.output.includes(w))))) {
      fail("worker", `no ${JSON.stringify(wanted)} within 30 s:\n${run.output}`);
    }
    run.child.kill("SIGTERM");
    // unref: the timer must not keep this script alive once the worker has exited.
    const code = await Promise.race([run.exited, new Promise((r) => setTimeout(() => r("still running 30 s after SIGTERM"), 30_000).unref())]);
    if (code !== 0) fail("worker", `after SIGTERM: ${code}\n${run.output}`);
    if (!run.output.includes("stopped")) fail("worker", `no "stopped" after SIGTERM:\n${run.output}`);
    const states = [(await client.getJob(report.id)).state, (await client.getJob(email.id)).state];
    if (states.join() !== "completed,completed") fail("worker", `jobs not completed (acked): ${states}\n${run.output}`);
  } finally {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill("SIGKILL");
  }
}

async function lambda() {
  const ns = namespace();
  const client = new Client(url, { namespace: ns });
  const received = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { "content-length": "0" }).end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const target = { webhook: { url: `http://127.0.0.1:${server.address().port}/lambda` } };
  try {
    process.env["HOURGLASS_SIGNING_SECRET"] = (await client.rotateSigningSecret({ overlap: "0s" })).signing_secret;
    await client.createJob({ schedule: { after: "10ms" }, target, type: "reminder.flight", payload: { passenger: "p-9", flight: "LH 401" } });
    await client.createJob({ schedule: { after: "10ms" }, target, type: "unknown.type" });
    if (!(await within(20, () => received.length >= 2))) fail("lambda", `${received.length} of 2 deliveries within 20 s`);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
  const { handler } = await import(join(examples, "lambda.js"));
  const byType = new Map(received.map((d) => [d.headers["hourglass-job-type"], d]));
  // A function URL event (payload format 2.0): lower-case names, a base64 body.
  const event = (d, body = d.body) => ({ headers: d.headers, body: body.toString("base64"), isBase64Encoded: true });
  const printed = [];
  const log = console.log;
  console.log = (...args) => printed.push(args.join(" "));
  let first;
  try {
    first = await handler(event(byType.get("reminder.flight")));
  } finally {
    console.log = log;
  }
  if (!printed.some((line) => line.includes("remind p-9 of LH 401"))) fail("lambda", `the handler printed ${JSON.stringify(printed)}, not the reminder`);
  const answers = [
    first,
    await handler(event(byType.get("unknown.type"))),
    await handler(event(byType.get("reminder.flight"), Buffer.from('{"forged":true}'))),
  ];
  if (answers.map((a) => a.statusCode).join() !== "200,422,401") fail("lambda", `answered ${JSON.stringify(answers)}, not 200, 422 and 401`);
}

const installed = realpathSync(join(here, "node_modules", "@hourglass", "client", "package.json"));
if (!installed.startsWith(realpathSync(here))) fail("(setup)", `the package resolves to ${installed}, outside this project`);
for (const [name, run] of [
  ["quickstart", quickstart],
  ["worker", worker],
  ["lambda", lambda],
]) {
  const started = Date.now();
  await run();
  console.log(`sdk-package: typescript example ${name} ok (${((Date.now() - started) / 1000).toFixed(1)}s)`);
}
