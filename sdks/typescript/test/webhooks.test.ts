/** The webhook verifier against deliveries a real node sent to a receiver in this process. */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { sign, signMetadata, WebhookVerificationError, WebhookVerifier } from "@hourglass/client";

import { handler } from "../examples/lambda.js";
import { clientFor, type Node, Receiver, startNode } from "./helpers.js";

let node: Node;
before(async () => {
  node = await startNode();
});
after(async () => {
  await node.stop();
});

function refuses(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof WebhookVerificationError && pattern.test(e.message));
}

describe("webhook verifier", () => {
  it("signs the Standard Webhooks reference vector", () => {
    const signature = sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}');
    assert.equal(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  it("signs metadata as the node does", () => {
    // The vector the node's own test checks (crates/engine/src/signing.rs).
    const signature = signMetadata(
      "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
      "01a1fee1265e739b98093d3692d507c6_1795277530719",
      1795277530,
      {
        "hourglass-job-id": "01a1fee1-265e-739b-9809-3d3692d507c6",
        "hourglass-due-at": "2026-11-22T12:12:10.719Z",
        "hourglass-attempt": "2",
        "hourglass-job-type": "reminder.flight",
      },
      '{"flight":"LH 400"}',
    );
    assert.equal(signature, "v1,8a/2M9ECOVVnij/pxrlAKLdK5QXhX8JStkWIqk/KuGk=");
  });

  it("accepts a real delivery and refuses forgeries", async () => {
    const client = clientFor(node);
    const receiver = await new Receiver().start();
    try {
      const secret = (await client.rotateSigningSecret({ overlap: "0s" })).signing_secret;
      receiver.status = 503; // the first attempt fails, so the second carries attempt 2
      const job = await client.createJob({
        schedule: { after: "50ms" },
        target: { webhook: { url: `${receiver.url}/hooks/reminder` } },
        type: "reminder.flight",
        payload: { passenger: "p-123", flight: "LH 400" },
        retry: { initial_backoff: "50ms", max_backoff: "100ms" },
      });
      const first = await receiver.next();
      receiver.status = 200;
      const second = await receiver.next();
      assert.equal(second.path, "/hooks/reminder");
      assert.equal(second.headers["webhook-id"], first.headers["webhook-id"]);

      const verifier = new WebhookVerifier(secret);
      const delivery = verifier.verify(second.body, second.headers);
      assert.equal(delivery.deliveryId, second.headers["webhook-id"]);
      assert.equal(delivery.jobId, job.id);
      assert.equal(delivery.type, "reminder.flight");
      assert.equal(delivery.attempt, 2);
      assert.deepEqual(delivery.payload, { passenger: "p-123", flight: "LH 400" });
      assert.equal(delivery.dueAt.toISOString(), job.next_due_at);
      assert.equal(verifier.verify(first.body, first.headers).attempt, 1);
      // A fetch Headers object and a string body work too.
      const headers = new Headers();
      for (const [k, v] of Object.entries(second.headers)) if (typeof v === "string") headers.set(k, v);
      assert.equal(verifier.verify(second.body.toString("utf8"), headers).deliveryId, delivery.deliveryId);

      const timestamp = Number(second.headers["webhook-timestamp"]);
      const tampered = Buffer.from(second.body.toString("utf8").replace("LH 400", "LH 401"));
      assert.notDeepEqual(tampered, second.body);
      refuses(() => verifier.verify(tampered, second.headers), /signature/);
      const stranger = new WebhookVerifier("whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=");
      refuses(() => stranger.verify(second.body, second.headers), /signature/);
      refuses(() => verifier.verify(second.body, second.headers, { now: timestamp + 301 }), /too old/);
      refuses(() => verifier.verify(second.body, second.headers, { now: timestamp - 301 }), /future/);
      assert.equal(verifier.verify(second.body, second.headers, { now: timestamp + 299 }).attempt, 2);
      refuses(() => verifier.verify(second.body, { ...second.headers, "webhook-timestamp": String(timestamp + 1) }), /signature/);
      // Issue 39, defect 8: a replay with an altered hourglass-* header (the body, id and timestamp
      // intact, so webhook-signature still matches) used to verify and answer the forged values.
      for (const [name, forged] of [
        ["hourglass-job-type", "account.delete"],
        ["hourglass-job-id", "00000000-0000-0000-0000-000000000000"],
        ["hourglass-attempt", "1"],
        ["hourglass-due-at", "2020-01-01T00:00:00.000Z"],
      ] as const) {
        refuses(() => verifier.verify(second.body, { ...second.headers, [name]: forged }), /hourglass-signature/);
      }
      const { "hourglass-job-type": _type, ...untyped } = second.headers;
      refuses(() => verifier.verify(second.body, untyped), /hourglass-signature/);
      const { "hourglass-signature": _meta, ...metaUnsigned } = second.headers;
      refuses(() => verifier.verify(second.body, metaUnsigned), /missing header hourglass-signature/);
      const { "webhook-signature": _, ...unsigned } = second.headers;
      refuses(() => verifier.verify(second.body, unsigned), /missing header webhook-signature/);
    } finally {
      await receiver.close();
    }
  });

  it("verifies with either secret during a rotation", async () => {
    const client = clientFor(node);
    const receiver = await new Receiver().start();
    try {
      const old = (await client.rotateSigningSecret({ overlap: "0s" })).signing_secret;
      const rotated = await client.rotateSigningSecret({ overlap: "1h" });
      assert.notEqual(rotated.previous_valid_until, null);
      await client.createJob({ schedule: { after: "10ms" }, target: { webhook: { url: `${receiver.url}/r` } }, payload: [1] });
      const delivery = await receiver.next();
      assert.equal(String(delivery.headers["webhook-signature"]).split(" ").length, 2);
      for (const secrets of [[old], [rotated.signing_secret], [old, rotated.signing_secret]]) {
        assert.deepEqual(new WebhookVerifier(secrets).verify(delivery.body, delivery.headers).payload, [1]);
      }
      refuses(() => new WebhookVerifier("whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=").verify(delivery.body, delivery.headers), /signature/);
    } finally {
      await receiver.close();
    }
  });

  it("verifies a real batch and each item in it", async () => {
    const client = clientFor(node);
    const receiver = await new Receiver().start();
    try {
      const secret = (await client.rotateSigningSecret({ overlap: "0s" })).signing_secret;
      const due = new Date(Date.now() + 600).toISOString();
      const jobs = [];
      for (const tenant of [0, 1, 2]) {
        jobs.push(
          await client.createJob({
            schedule: { at: due },
            target: { webhook: { url: `${receiver.url}/batch`, batch: { max_items: 10 } } },
            type: "export.nightly",
            payload: { tenant },
          }),
        );
      }
      assert.deepEqual(jobs[0]!.target.webhook?.batch, { max_items: 10 });
      const verifier = new WebhookVerifier(secret);
      const seen = new Map<string, ReturnType<WebhookVerifier["verifyBatch"]>[number]>();
      const requests = [];
      while (seen.size < 3) {
        const request = await receiver.next();
        requests.push(request);
        for (const delivery of verifier.verifyBatch(request.body, request.headers)) seen.set(delivery.jobId, delivery);
      }
      for (const job of jobs) {
        const delivery = seen.get(job.id);
        assert.ok(delivery, `job ${job.id} arrived`);
        assert.equal(delivery.dueAt.toISOString(), job.next_due_at);
        assert.equal(delivery.deliveryId, `${job.id.replaceAll("-", "")}_${delivery.dueAt.getTime()}`);
        assert.equal(delivery.type, "export.nightly");
        assert.equal(delivery.attempt, 1);
      }
      assert.deepEqual([...seen.values()].map((d) => (d.payload as { tenant: number }).tenant).sort(), [0, 1, 2]);

      const request = requests[0]!;
      refuses(() => verifier.verify(request.body, request.headers), /verifyBatch/);
      refuses(() => verifier.verifyBatch(request.body.toString("utf8").replace("tenant", "tenanT"), request.headers), /signature/);
      refuses(() => verifier.verifyBatch(request.body, { ...request.headers, "hourglass-batch-size": "999" }), /hourglass-batch-size/);
      // Signed with the right secret, an item whose facts disagree with its id is refused.
      const body = JSON.parse(request.body.toString("utf8")) as { deliveries: { job_id: string }[] };
      body.deliveries[0]!.job_id = "01a1fee1-265e-739b-9809-3d3692d507c6";
      const forged = JSON.stringify(body);
      const batchId = String(request.headers["webhook-id"]);
      const stamp = Number(request.headers["webhook-timestamp"]);
      refuses(() => verifier.verifyBatch(forged, { ...request.headers, "webhook-signature": sign(secret, batchId, stamp, forged) }), /job_id/);
    } finally {
      await receiver.close();
    }
  });

  it("refuses malformed secrets", () => {
    assert.throws(() => new WebhookVerifier("whsec_short"), TypeError);
    assert.throws(() => new WebhookVerifier("whsec_%%%"), TypeError);
    assert.throws(() => new WebhookVerifier([]), TypeError);
  });

  it("runs the Lambda example on a real delivery as a function URL event", async () => {
    const client = clientFor(node);
    const receiver = await new Receiver().start();
    try {
      const secret = (await client.rotateSigningSecret({ overlap: "0s" })).signing_secret;
      process.env["HOURGLASS_SIGNING_SECRET"] = secret;
      await client.createJob({
        schedule: { after: "10ms" },
        target: { webhook: { url: `${receiver.url}/lambda` } },
        type: "reminder.flight",
        payload: { passenger: "p-9", flight: "LH 401" },
      });
      await client.createJob({ schedule: { after: "10ms" }, target: { webhook: { url: `${receiver.url}/lambda` } }, type: "unknown.type" });
      const deliveries = [await receiver.next(), await receiver.next()];
      const byType = new Map(deliveries.map((d) => [String(d.headers["hourglass-job-type"]), d]));
      const event = (d: (typeof deliveries)[number], body = d.body) => ({
        headers: Object.fromEntries(Object.entries(d.headers).map(([k, v]) => [k, String(v)])),
        body: body.toString("base64"),
        isBase64Encoded: true,
      });
      const flight = byType.get("reminder.flight")!;
      assert.deepEqual(await handler(event(flight)), { statusCode: 200, body: "ok" });
      assert.equal((await handler(event(byType.get("unknown.type")!))).statusCode, 422);
      assert.equal((await handler(event(flight, Buffer.from('{"forged":true}')))).statusCode, 401);
    } finally {
      delete process.env["HOURGLASS_SIGNING_SECRET"];
      await receiver.close();
    }
  });
});
