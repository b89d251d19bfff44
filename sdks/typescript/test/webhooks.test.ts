/** The webhook verifier against deliveries a real node sent to a receiver in this process. */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import { after, before, describe, it } from "node:test";

import { type HeadersLike, sign, signMetadata, WebhookVerificationError, WebhookVerifier } from "@hourglass/client";

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

// Issue 36: the Python verifier failed on the standard library's header object; here the same class
// of problem in Node's shapes. Joined repeats ("v1,a, v1,b") hid a signature, rawHeaders and
// [name, value] pairs read as "missing header", null headers (a Lambda event with none) and a Map
// of arrays threw a TypeError instead of a WebhookVerificationError. These deliveries are signed
// with the package's `sign` and `signMetadata`, which the vectors above hold to the node's.
describe("webhook verifier: header collections", () => {
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const jobId = "01a1fee1-265e-739b-9809-3d3692d507c6";
  const stranger = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=";

  /** A delivery as the node sends it: the body and its headers, names as on the wire. */
  function signedDelivery(now: number): { body: string; pairs: [string, string][] } {
    const body = '{"flight":"LH 400"}';
    const dueMs = (now - 1) * 1000 + 719;
    const id = `${jobId.replaceAll("-", "")}_${dueMs}`;
    const metadata = {
      "hourglass-job-id": jobId,
      "hourglass-due-at": new Date(dueMs).toISOString(),
      "hourglass-attempt": "2",
      "hourglass-job-type": "reminder.flight",
    };
    const title = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());
    const pairs: [string, string][] = [
      ["Content-Type", "application/json"],
      ["Webhook-Id", id],
      ["Webhook-Timestamp", String(now)],
      ["Webhook-Signature", sign(secret, id, now, body)],
      ...Object.entries(metadata).map(([k, v]): [string, string] => [title(k), v]),
      ["Hourglass-Signature", signMetadata(secret, id, now, metadata, body)],
    ];
    return { body, pairs };
  }

  const now = Math.floor(Date.now() / 1000);
  const { body, pairs } = signedDelivery(now);
  const verifier = new WebhookVerifier(secret);
  const without = (name: string) => pairs.filter(([k]) => k.toLowerCase() !== name);
  const realSignature = pairs.find(([k]) => k === "Webhook-Signature")![1];
  const strangerSignature = sign(stranger, "x", now, body);

  it("accepts every common kind of header collection", () => {
    const forms: Record<string, HeadersLike> = {
      "a fetch Headers": new Headers(pairs),
      "an object, names as sent": Object.fromEntries(pairs),
      "an object, names lower-cased": Object.fromEntries(pairs.map(([k, v]) => [k.toLowerCase(), v])),
      "an object of arrays (headersDistinct, multiValueHeaders)": Object.fromEntries(pairs.map(([k, v]) => [k, [v]])),
      "[name, value] pairs": pairs,
      "a Map": new Map(pairs),
      "a Map of arrays": new Map(pairs.map(([k, v]) => [k, [v]])),
      "Node's rawHeaders (names and values in one list)": pairs.flat(),
    };
    for (const [what, headers] of Object.entries(forms)) {
      const delivery = verifier.verify(body, headers);
      assert.deepEqual([delivery.jobId, delivery.attempt, delivery.type], [jobId, 2, "reminder.flight"], what);
    }
  });

  it("reads repeated signature headers, joined or not, as candidates alike", () => {
    const repeated = new Headers(without("webhook-signature"));
    repeated.append("webhook-signature", realSignature);
    repeated.append("webhook-signature", strangerSignature);
    assert.equal(verifier.verify(body, repeated).attempt, 2);
    const joined = { ...Object.fromEntries(without("webhook-signature")), "webhook-signature": `${realSignature}, ${strangerSignature}` };
    assert.equal(verifier.verify(body, joined).attempt, 2);
    const listed = { ...Object.fromEntries(without("webhook-signature")), "webhook-signature": [realSignature, strangerSignature] };
    assert.equal(verifier.verify(body, listed).attempt, 2);
    refuses(() => verifier.verify(body, [...without("webhook-signature"), ["webhook-signature", strangerSignature]]), /no signature/);
  });

  it("refuses missing, conflicting and malformed headers with its own error", () => {
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature", "hourglass-signature"]) {
      refuses(() => verifier.verify(body, without(name)), new RegExp(`missing header ${name}`));
      refuses(() => verifier.verify(body, new Headers(without(name))), new RegExp(`missing header ${name}`));
    }
    for (const none of [null, undefined, {}, [], new Headers()]) {
      refuses(() => verifier.verify(body, none), /missing header webhook-id/);
    }
    refuses(() => verifier.verify(body, [...pairs, ["webhook-id", "msg_other"]]), /webhook-id/);
    refuses(() => verifier.verify(body, { ...Object.fromEntries(pairs), "webhook-timestamp": "soon" }), /webhook-timestamp/);
    // Two spellings of one name in an object, with different values, are refused, not picked from.
    refuses(() => verifier.verify(body, { ...Object.fromEntries(pairs), "hourglass-attempt": "1" }), /hourglass-attempt/);
    // A header repeated with the same value is that value.
    assert.equal(verifier.verify(body, [...pairs, ["hourglass-attempt", "2"]]).attempt, 2);
  });

  it("answers a TypeError for what is no header collection", () => {
    for (const wrong of [42, "webhook-id: x", ["webhook-id"], [["a", "b", "c"]], { "webhook-id": { id: 1 } }]) {
      assert.throws(() => verifier.verify(body, wrong as unknown as HeadersLike), (e: unknown) => e instanceof TypeError && /headers/.test(e.message));
    }
  });

  it("verifies a real delivery from each of node:http's header views", async () => {
    const client = clientFor(node);
    const nodeSecret = (await client.rotateSigningSecret({ overlap: "0s" })).signing_secret;
    const real = new WebhookVerifier(nodeSecret);
    type View = (req: IncomingMessage) => HeadersLike;
    const views: Record<string, View> = {
      headers: (req) => req.headers,
      headersDistinct: (req) => req.headersDistinct,
      rawHeaders: (req) => req.rawHeaders,
      "new Headers": (req) => new Headers(Object.entries(req.headersDistinct).flatMap(([k, vs]) => (vs ?? []).map((v): [string, string] => [k, v]))),
    };
    const answers: { view: string; status: number; note: string }[] = [];
    let recorded: { body: Buffer; headers: [string, string][] } | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const raw = Buffer.concat(chunks);
        recorded ??= { body: raw, headers: Object.entries(req.headersDistinct).flatMap(([k, vs]) => (vs ?? []).map((v): [string, string] => [k, v])) };
        let worst = 200;
        for (const [view, headersOf] of Object.entries(views)) {
          let status = 200;
          let note = "";
          try {
            note = real.verify(raw, headersOf(req)).deliveryId;
          } catch (e) {
            status = e instanceof WebhookVerificationError ? 401 : 500;
            note = `${(e as Error).name}: ${(e as Error).message}`;
          }
          answers.push({ view, status, note });
          worst = Math.max(worst, status);
        }
        res.writeHead(worst, { "content-length": "0" }).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    const url = `http://127.0.0.1:${port}/hooks`;
    try {
      await client.createJob({ schedule: { after: "10ms" }, target: { webhook: { url } }, type: "reminder.flight", payload: [1] });
      const deadline = Date.now() + 20_000;
      while (answers.length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(answers.map((a) => [a.view, a.status]), Object.keys(views).map((v) => [v, 200]), JSON.stringify(answers));

      // The same delivery replayed with a second webhook-signature line after the real one: each
      // view still finds the real signature.
      answers.length = 0;
      const replay = new Headers();
      for (const [k, v] of recorded!.headers) if (k !== "content-length" && k !== "host" && k !== "connection") replay.append(k, v);
      replay.append("webhook-signature", sign(stranger, "x", now, recorded!.body));
      const answer = await fetch(url, { method: "POST", body: recorded!.body, headers: replay });
      assert.deepEqual(answers.map((a) => [a.view, a.status]), Object.keys(views).map((v) => [v, 200]), JSON.stringify(answers));
      assert.equal(answer.status, 200);

      // A request without the delivery's headers: 401 from every view, never 500.
      answers.length = 0;
      const forged = await fetch(url, { method: "POST", body: "[1]", headers: { "webhook-id": "msg_x" } });
      assert.equal(forged.status, 401);
      assert.deepEqual(answers.map((a) => [a.view, a.status]), Object.keys(views).map((v) => [v, 401]));
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
