/** The pull-queue worker against a real node. */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { ApiError, Client, type NewJob, RetryLater, Worker } from "@hourglass/client";

import { clientFor, type Node, namespace, quietLogger, SDK_DIR, startNode, waitFor } from "./helpers.js";

let node: Node;
before(async () => {
  node = await startNode();
});
after(async () => {
  await node.stop();
});

function queued(type: string, extra: Partial<NewJob> = {}): NewJob {
  return { schedule: { after: "10ms" }, target: { queue: "work" }, type, ...extra };
}

describe("worker", () => {
  it("handles, fails (nack) and retries", async () => {
    const client = clientFor(node);
    const logger = quietLogger();
    const worker = new Worker(client, "work", { concurrency: 4, pollWaitMs: 1000, logger });
    const seen: Array<[string, number]> = [];
    worker
      .handle("email.send", async (job) => {
        seen.push([(job.payload as { to: string }).to, job.attempt]);
      })
      .handle("flaky", (job) => {
        seen.push(["flaky", job.attempt]);
        if (job.attempt === 1) throw new Error("the first try fails");
      })
      .handle("later", async (job) => {
        seen.push(["later", job.attempt]);
        if (job.attempt === 1) throw new RetryLater(50);
      })
      .handle("doomed", async (job) => {
        seen.push(["doomed", job.attempt]);
        throw new Error("always");
      });
    const stop = new AbortController();
    const running = worker.run({ signal: stop.signal });
    const fast = { max_attempts: 2, initial_backoff: "50ms", max_backoff: "50ms" };
    const jobs = {
      a: await client.createJob(queued("email.send", { payload: { to: "a" } })),
      b: await client.createJob(queued("email.send", { payload: { to: "b" } })),
      flaky: await client.createJob(queued("flaky", { retry: fast })),
      later: await client.createJob(queued("later")),
      doomed: await client.createJob(queued("doomed", { retry: fast })),
    };
    await waitFor("every job to settle", async () => {
      const states = await Promise.all(Object.values(jobs).map(async (j) => (await client.getJob(j.id)).state));
      return states.every((s) => s === "completed" || s === "failed");
    });
    stop.abort();
    await running;

    for (const name of ["a", "b", "flaky", "later"] as const) {
      assert.equal((await client.getJob(jobs[name].id)).state, "completed", name);
    }
    assert.equal((await client.getJob(jobs.doomed.id)).state, "failed");
    const [dead, ...more] = (await client.listDeadLetters()).dead_letters;
    assert.equal(more.length, 0);
    assert.deepEqual([dead?.job_id, dead?.attempts], [jobs.doomed.id, 2]);
    assert.deepEqual((await client.listJobRuns(jobs.flaky.id)).runs.map((r) => r.outcome), ["delivered", "retry"]);
    assert.deepEqual(
      seen.map((s) => s.join(":")).sort(),
      ["a:1", "b:1", "doomed:1", "doomed:2", "flaky:1", "flaky:2", "later:1", "later:2"],
    );
    assert.ok(logger.lines.some((l) => l.includes("handler failed") && l.includes("the first try fails")));
  });

  it("keeps the lease of a long handler", async () => {
    const client = clientFor(node);
    // A 1 s visibility: without extensions the message would come back mid-handler.
    const worker = new Worker(client, "work", { visibilityMs: 1000, pollWaitMs: 500, logger: quietLogger() });
    const calls: number[] = [];
    worker.handle("slow", async (job) => {
      calls.push(job.attempt);
      await sleep(2500);
    });
    const stop = new AbortController();
    const running = worker.run({ signal: stop.signal });
    const job = await client.createJob(queued("slow"));
    await waitFor("the slow job to complete", async () => (await client.getJob(job.id)).state === "completed");
    stop.abort();
    await running;
    assert.deepEqual(calls, [1]);
  });

  it("drains running handlers on shutdown", async () => {
    const client = clientFor(node);
    const worker = new Worker(client, "work", { logger: quietLogger() });
    let started!: () => void;
    const handlerStarted = new Promise<void>((r) => (started = r));
    const finished: string[] = [];
    worker.handle("report", async (job) => {
      started();
      await sleep(500);
      finished.push(job.job_id);
    });
    const stop = new AbortController();
    const running = worker.run({ signal: stop.signal });
    const job = await client.createJob(queued("report"));
    await handlerStarted;
    stop.abort();
    await running;
    // run() resolved only after the handler finished and its ack was written.
    assert.deepEqual(finished, [job.id]);
    assert.equal((await client.getJob(job.id)).state, "completed");
  });

  it("nacks handlers still running after the grace, for another worker", async () => {
    const client = clientFor(node);
    const worker = new Worker(client, "work", { shutdownGraceMs: 200, pollWaitMs: 1000, logger: quietLogger() });
    let started!: () => void;
    const handlerStarted = new Promise<void>((r) => (started = r));
    let sawAbort = false;
    worker.handle("stuck", async (_job, { signal }) => {
      started();
      await sleep(60_000, undefined, { signal }).catch(() => {
        sawAbort = signal.aborted;
      });
    });
    const stop = new AbortController();
    const running = worker.run({ signal: stop.signal });
    const job = await client.createJob(queued("stuck"));
    await handlerStarted;
    stop.abort();
    await running;
    assert.ok(sawAbort);
    // Nacked with delay 0: available again at once, not after the visibility timeout.
    const [again] = await client.lease("work", { wait_ms: 2000 });
    assert.deepEqual([again?.job_id, again?.attempt], [job.id, 2]);
    await client.ack("work", [again!.receipt]);
  });

  it("drains the example worker on SIGTERM", async () => {
    const ns = namespace();
    const client = clientFor(node, ns);
    const child = spawn(process.execPath, [join(SDK_DIR, "build/examples/worker.js")], {
      env: { ...process.env, HOURGLASS_URL: node.url, HOURGLASS_NAMESPACE: ns, HOURGLASS_QUEUE: "tasks" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((r) => child.once("exit", r));
    try {
      const job = await client.createJob({
        schedule: { after: "10ms" },
        target: { queue: "tasks" },
        type: "task",
        payload: { action: "report.generate", seconds: 1 },
      });
      await waitFor("the handler to start", () => output.includes(`start report.generate ${job.id}`));
      child.kill("SIGTERM");
      assert.equal(await exited, 0, output);
      assert.match(output, new RegExp(`done report.generate ${job.id}`));
      assert.match(output, /stopped/);
      assert.equal((await client.getJob(job.id)).state, "completed");
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  it("stops with the error when the node refuses the lease for good", async () => {
    const client = new Client(node.url, { namespace: "bad namespace!" });
    const worker = new Worker(client, "work", { logger: quietLogger() }).handle("x", () => {});
    await assert.rejects(worker.run(), (e: unknown) => e instanceof ApiError && e.code === "invalid_namespace");
  });
});
