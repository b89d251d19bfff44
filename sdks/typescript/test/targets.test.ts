/**
 * Bus and cloud targets, and the connections they name, against a node with a config file. No bus
 * or cloud service runs: the jobs are due in an hour, so nothing is published while the tests run
 * (the node connects only to publish).
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { ApiError, type JobTarget, type NewJob, type Target } from "@hourglass/client";

import { clientFor, type Node, startNode } from "./helpers.js";

// Names and kinds only matter here; the AWS connection has static credentials and a local
// endpoint so that nothing would leave the machine even if something were published. The NATS
// connections point where nothing listens (the discard port), so the node cannot ask for streams
// and takes the jobs, whatever runs on this machine's NATS port.
const CONFIG = `
[connections.bus]
kind = "nats"
url = "nats://127.0.0.1:9"

[connections.aws]
kind = "aws"
region = "eu-central-1"
endpoint_url = "http://127.0.0.1:9"
access_key_id = "AKIDEXAMPLE"
secret_access_key = "not-a-secret"

[connections.r]
kind = "redis"
url = "redis://127.0.0.1:6379/0"

[connections.rmq]
kind = "amqp"
url = "amqp://guest:guest@127.0.0.1:5672/%2f"

[connections.elsewhere]
kind = "nats"
url = "nats://127.0.0.1:9"
namespaces = ["someone-else"]
`;

const QUEUE_URL = "https://sqs.eu-central-1.amazonaws.com/123456789012/reminders.fifo";

let node: Node;
let plain: Node;
before(async () => {
  [node, plain] = await Promise.all([startNode({ config: CONFIG }), startNode()]);
});
after(async () => {
  await Promise.all([node.stop(), plain.stop()]);
});

async function rejectsWith(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ApiError, `expected an ApiError, got ${String(e)}`);
    return e;
  }
  assert.fail("expected the call to be refused");
}

describe("bus and cloud targets", () => {
  it("creates NATS and SQS jobs and gets their targets back", async () => {
    const client = clientFor(node);
    const nats = await client.createJob({
      type: "reminder",
      schedule: { after: "1h" },
      target: { nats: { connection: "bus", subject: "jobs.reminder" } },
    });
    const sqs = await client.createJob({
      schedule: { after: "1h" },
      target: { sqs: { connection: "aws", queue_url: QUEUE_URL, group_id: "acme" } },
      payload: { n: 1 },
    });
    assert.deepEqual(nats.target, { nats: { connection: "bus", subject: "jobs.reminder" } });
    assert.equal(nats.target.nats?.subject, "jobs.reminder");
    assert.deepEqual(sqs.target.sqs, { connection: "aws", queue_url: QUEUE_URL, group_id: "acme" });

    assert.deepEqual(await client.getJob(nats.id), nats);
    assert.deepEqual((await client.getJob(sqs.id)).target, sqs.target);
    const listed = new Map((await client.listJobs()).jobs.map((j) => [j.id, j.target]));
    assert.deepEqual(listed, new Map<string, JobTarget>([[nats.id, nats.target], [sqs.id, sqs.target]]));

    const withoutGroup = await client.updateJob(sqs.id, { target: { sqs: { connection: "aws", queue_url: QUEUE_URL } } });
    assert.deepEqual(withoutGroup.target, { sqs: { connection: "aws", queue_url: QUEUE_URL } });
  });

  it("round-trips every kind", async () => {
    const client = clientFor(node);
    const cases: [Target, JobTarget][] = [
      [
        { eventbridge: { connection: "aws", bus: "orders", source: "hourglass", detail_type: "job-reminder" } },
        { eventbridge: { connection: "aws", bus: "orders", source: "hourglass", detail_type: "job-reminder" } },
      ],
      [
        { sns: { connection: "aws", topic_arn: "arn:aws:sns:eu-central-1:123456789012:reminders" } },
        { sns: { connection: "aws", topic_arn: "arn:aws:sns:eu-central-1:123456789012:reminders" } },
      ],
      [{ lambda: { connection: "aws", function: "reminders" } }, { lambda: { connection: "aws", function: "reminders" } }],
      [{ redis_stream: { connection: "r", stream: "jobs" } }, { redis_stream: { connection: "r", stream: "jobs" } }],
      [
        { amqp: { connection: "rmq", exchange: "jobs", routing_key: "reminder" } },
        { amqp: { connection: "rmq", exchange: "jobs", routing_key: "reminder" } },
      ],
      // The node shows a routing key left out as "".
      [{ amqp: { connection: "rmq", exchange: "" } }, { amqp: { connection: "rmq", exchange: "", routing_key: "" } }],
    ];
    for (const [target, expected] of cases) {
      // An EventBridge event's detail is the payload: a JSON object.
      const job = await client.createJob({ schedule: { after: "1h" }, target, payload: { flight: "LH 400" } });
      assert.deepEqual(job.target, expected);
      assert.deepEqual((await client.getJob(job.id)).target, expected);
    }
  });

  it("lists the namespace's connections", async () => {
    const connections = await clientFor(node).listConnections();
    // `elsewhere` is for another namespace only: not listed here.
    assert.deepEqual(
      connections.map((c) => [c.name, c.kind]).sort(),
      [
        ["aws", "aws"],
        ["bus", "nats"],
        ["r", "redis"],
        ["rmq", "amqp"],
      ],
    );
    // Every namespace may use `bus`: its publish counts would be theirs too, so none are shown.
    assert.equal(connections.find((c) => c.name === "bus")?.published, null);
    assert.deepEqual(await clientFor(plain).listConnections(), []);
  });

  it("refuses an unknown connection with a typed ApiError", async () => {
    const client = clientFor(node);
    const job = (connection: string): NewJob => ({
      schedule: { after: "1h" },
      target: { nats: { connection, subject: "jobs.reminder" } },
    });
    const unknown = await rejectsWith(client.createJob(job("nope")));
    assert.deepEqual([unknown.status, unknown.code, unknown.field], [422, "unknown_connection", "target.nats.connection"]);
    assert.equal(unknown.retryable, false);
    // One the namespace may not use answers the same.
    const notOurs = await rejectsWith(client.createJob(job("elsewhere")));
    assert.deepEqual([notOurs.code, notOurs.field], ["unknown_connection", "target.nats.connection"]);
    // A node without connections.
    assert.equal((await rejectsWith(clientFor(plain).createJob(job("bus")))).code, "unknown_connection");
    // A connection of another kind is a malformed field.
    const wrongKind = await rejectsWith(
      client.createJob({ schedule: { after: "1h" }, target: { sqs: { connection: "bus", queue_url: QUEUE_URL } } }),
    );
    assert.deepEqual([wrongKind.status, wrongKind.field], [422, "target.sqs.connection"]);
    assert.deepEqual((await client.listJobs()).jobs, []);
  });

  it("types a target as exactly one kind", () => {
    // Compile-time checks (tsc --strict runs on the tests): each line below must not compile.
    // @ts-expect-error two kinds
    const two: Target = { queue: "q", nats: { connection: "bus", subject: "s" } };
    // @ts-expect-error no kind
    const none: Target = {};
    // @ts-expect-error a NATS target without its subject
    const partial: Target = { nats: { connection: "bus" } };
    assert.ok(two && none && partial);
  });
});
