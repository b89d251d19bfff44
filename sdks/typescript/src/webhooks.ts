/**
 * Verifying webhook deliveries: the Standard Webhooks signature and the timestamp tolerance.
 *
 * The node signs `<webhook-id>.<webhook-timestamp>.<body>` with HMAC-SHA256 keyed by the
 * namespace's `whsec_` secret (the base64 after the prefix, decoded) and sends
 * `webhook-signature: v1,<base64>`; during a rotation's overlap, two space-separated signatures,
 * one per secret. A delivery is genuine when any of them matches any secret the receiver knows.
 *
 * That signature leaves the `hourglass-*` headers out, so a single delivery also carries
 * `hourglass-signature: v1,<base64>`: HMAC-SHA256, keyed by `HMAC-SHA256(secret key,
 * "hourglass-signature")`, of `<webhook-id>\n<webhook-timestamp>\n<hourglass-job-id>\n
 * <hourglass-due-at>\n<hourglass-attempt>\n<hourglass-job-type or empty>\n<body>`. `verify`
 * refuses a delivery unless both signatures match, so every field of the `Delivery` it answers is
 * the node's: a replay with an altered header is refused. The job id and the due time are also
 * inside the signed `webhook-id` (`<job id without hyphens>_<due unix ms>`) and must agree with it.
 *
 * A target with `batch` gets its deliveries several to a request (the `jobOccurrenceBatch`
 * webhook): `verifyBatch` checks the request and answers each item as a `Delivery`. There every
 * fact is inside the signed body.
 */

import { createHmac, timingSafeEqual } from "node:crypto";

import { WebhookVerificationError } from "./errors.js";
import type { Json } from "./types.js";

/** Seconds a delivery's timestamp may be from the receiver's clock (Standard Webhooks: 5 min). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * The headers of a delivery (the OpenAPI document's `jobOccurrence` and `jobOccurrenceBatch`
 * webhooks) and the `Delivery` field each one fills; `null`: read to verify the delivery only.
 */
export const deliveryHeaders = {
  "webhook-id": "deliveryId",
  "webhook-timestamp": "timestamp",
  "webhook-signature": null,
  "hourglass-job-id": "jobId",
  "hourglass-due-at": "dueAt",
  "hourglass-attempt": "attempt",
  "hourglass-job-type": "type",
  "hourglass-batch-size": null,
  "hourglass-signature": null,
} as const satisfies Record<string, keyof Delivery | null>;

const DELIVERY_ID = /^([0-9a-f]{32})_(-?[0-9]+)$/;
const BATCH_ID = /^batch_[0-9a-f]{32}$/;

/** A verified delivery. */
export interface Delivery {
  /**
   * The `webhook-id` (in a batch, the item's `id`): identical on every retry of this occurrence.
   * Deduplicate on it.
   */
  deliveryId: string;
  jobId: string;
  /** The job's `type` (`hourglass-job-type`, signed by `hourglass-signature`). */
  type: string | null;
  /** 1-based (`hourglass-attempt`, signed by `hourglass-signature`). */
  attempt: number;
  /** The occurrence's nominal due instant. */
  dueAt: Date;
  /** When this attempt was sent (unix seconds, signed). */
  timestamp: number;
  /** The job's payload, decoded (`null` when the job has none). */
  payload: Json;
}

/**
 * The request headers `verify` takes, as servers give them: a `fetch` `Headers`; an object
 * (Node's `request.headers` and `request.headersDistinct`, a Lambda event's `headers` or
 * `multiValueHeaders`); a `Map` or `[name, value]` pairs; Node's `request.rawHeaders` (names and
 * values in one list). Names in any case; a value may be a list of values; `null` or `undefined`:
 * no headers.
 */
export type HeadersLike =
  | Headers
  | Record<string, string | readonly string[] | undefined>
  | ReadonlyMap<string, string | readonly string[]>
  | Iterable<readonly [string, string]>
  | readonly string[]
  | null
  | undefined;

function key(secret: string): Buffer {
  const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new TypeError("a signing secret is whsec_ followed by base64");
  const bytes = Buffer.from(encoded, "base64");
  if (bytes.length < 16) throw new TypeError("a signing secret decodes to at least 16 bytes");
  return bytes;
}

function toBytes(body: string | Uint8Array): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** The `webhook-signature` value the node sends for this delivery with this secret. */
export function sign(secret: string, deliveryId: string, timestamp: number, body: string | Uint8Array): string {
  const mac = createHmac("sha256", key(secret));
  mac.update(`${deliveryId}.${timestamp}.`);
  mac.update(toBytes(body));
  return `v1,${mac.digest("base64")}`;
}

const METADATA_KEY_LABEL = "hourglass-signature";
const METADATA_HEADERS = ["hourglass-job-id", "hourglass-due-at", "hourglass-attempt", "hourglass-job-type"] as const;

/** The key of `hourglass-signature`, derived from the secret's: a key of its own, so that neither
 * signature can stand for the other. */
function metadataKey(secretKey: Buffer): Buffer {
  return createHmac("sha256", secretKey).update(METADATA_KEY_LABEL).digest();
}

/** What `hourglass-signature` covers, or `null` when a value holds a line break (no header value
 * the node sent does). An absent header is an empty line. */
function metadataText(id: string, stamp: string, headers: Map<string, string>, raw: Buffer): Buffer | null {
  const parts = [id, stamp, ...METADATA_HEADERS.map((name) => (headers.get(name) ?? "").replace(/^[ \t]+|[ \t]+$/g, ""))];
  if (parts.some((p) => /[\r\n]/.test(p))) return null;
  return Buffer.concat([Buffer.from(parts.map((p) => `${p}\n`).join(""), "utf8"), raw]);
}

/**
 * The `hourglass-signature` value the node sends for a delivery with these `hourglass-*` headers
 * (lower-case names) and this secret.
 */
export function signMetadata(
  secret: string,
  deliveryId: string,
  timestamp: number,
  headers: Record<string, string>,
  body: string | Uint8Array,
): string {
  const text = metadataText(deliveryId, String(timestamp), new Map(Object.entries(headers)), toBytes(body));
  if (text === null) throw new TypeError("header values hold no line breaks");
  return `v1,${createHmac("sha256", metadataKey(key(secret))).update(text).digest("base64")}`;
}

const HEADERS_EXPECTED =
  "headers: expected a Headers, an object (request.headers), a Map, [name, value] pairs or request.rawHeaders";

/**
 * The headers by lower-case name. A name given more than once: the signatures of every
 * `webhook-signature` (each one is a candidate), and for the other headers of a delivery, the one
 * value they agree on; unrelated headers are joined with ", " and never read.
 */
function collect(headers: HeadersLike): Map<string, string> {
  const values = new Map<string, string[]>();
  const add = (name: unknown, value: unknown): void => {
    if (typeof name !== "string") throw new TypeError(`${HEADERS_EXPECTED}; a header name is a ${kind(name)}`);
    if (value === undefined || value === null) return;
    const key = name.trim().toLowerCase();
    for (const v of Array.isArray(value) ? (value as unknown[]) : [value]) {
      if (typeof v !== "string" && typeof v !== "number") {
        throw new TypeError(`${HEADERS_EXPECTED}; the value of ${key} is a ${kind(v)}`);
      }
      const listed = values.get(key);
      if (listed) listed.push(String(v));
      else values.set(key, [String(v)]);
    }
  };
  const pairs = (entries: Iterable<unknown>): void => {
    for (const entry of entries) {
      if (!Array.isArray(entry) || entry.length !== 2) throw new TypeError(`${HEADERS_EXPECTED}; an entry is a ${kind(entry)}`);
      add(entry[0], entry[1]);
    }
  };
  if (headers === null || headers === undefined) {
    // no headers: every required one is missing
  } else if (typeof headers !== "object") {
    throw new TypeError(`${HEADERS_EXPECTED}, not a ${kind(headers)}`);
  } else if (Array.isArray(headers) && headers.every((e) => typeof e === "string")) {
    // request.rawHeaders: [name, value, name, value, ...]
    if (headers.length % 2 !== 0) throw new TypeError(`${HEADERS_EXPECTED}; a flat list has an odd length`);
    for (let i = 0; i < headers.length; i += 2) add(headers[i], headers[i + 1]);
  } else if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === "function") {
    // Headers, Map and pairs iterate as [name, value].
    pairs(headers as Iterable<unknown>);
  } else {
    for (const [name, value] of Object.entries(headers)) add(name, value);
  }
  const found = new Map<string, string>();
  for (const [name, listed] of values) {
    if (name === "webhook-signature") {
      found.set(name, listed.join(" "));
    } else if (Object.hasOwn(deliveryHeaders, name)) {
      if (new Set(listed.map((v) => v.trim())).size > 1) {
        throw new WebhookVerificationError(`header ${name} is sent more than once, differently`);
      }
      found.set(name, listed[0]!);
    } else {
      found.set(name, listed.join(", "));
    }
  }
  return found;
}

function kind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value === "object" ? (value.constructor?.name ?? "object") : typeof value;
}

/**
 * Checks that a request is a genuine, fresh delivery from the node.
 *
 * ```ts
 * const verifier = new WebhookVerifier(process.env.HOURGLASS_SIGNING_SECRET!);
 * const delivery = verifier.verify(rawBody, request.headers);
 * ```
 *
 * Give several secrets during your own move to a new one.
 */
export class WebhookVerifier {
  readonly #keys: Buffer[];
  readonly #metadataKeys: Buffer[];
  readonly toleranceSeconds: number;

  constructor(secrets: string | string[], options: { toleranceSeconds?: number } = {}) {
    const listed = typeof secrets === "string" ? [secrets] : secrets;
    if (listed.length === 0) throw new TypeError("a verifier needs at least one secret");
    this.#keys = listed.map(key);
    this.#metadataKeys = this.#keys.map(metadataKey);
    this.toleranceSeconds = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  }

  /**
   * The delivery, or a `WebhookVerificationError` (a missing, repeated or malformed header, no
   * matching signature, a timestamp outside the tolerance). `body` must be the raw request body,
   * byte for byte as received; `headers` the request's headers as your server gives them (see
   * `HeadersLike`). A `TypeError`: `headers` is none of those. `now` (unix seconds) is for tests.
   */
  verify(body: string | Uint8Array, headers: HeadersLike, options: { now?: number } = {}): Delivery {
    const { id, timestamp, raw, found } = this.#check(body, headers, options.now);
    if (BATCH_ID.test(id)) throw new WebhookVerificationError("webhook-id is a batch's: use verifyBatch");
    // The hourglass-* headers are the node's only under their own signature.
    const metadataSignatures = required(found, "hourglass-signature");
    const text = metadataText(id, required(found, "webhook-timestamp"), found, raw);
    if (text === null || !matches(this.#metadataKeys, text, metadataSignatures)) {
      throw new WebhookVerificationError("hourglass-signature does not match: the hourglass-* headers were altered");
    }
    return delivery(id, timestamp, raw, found);
  }

  /**
   * The deliveries of a batch (a target with `batch`), in the order sent, or a
   * `WebhookVerificationError`. Answer a 2xx, with `{"failed": ["<deliveryId>", ...]}` for the
   * items to be retried.
   */
  verifyBatch(body: string | Uint8Array, headers: HeadersLike, options: { now?: number } = {}): Delivery[] {
    const { id, timestamp, raw, found } = this.#check(body, headers, options.now);
    if (!BATCH_ID.test(id)) throw new WebhookVerificationError("webhook-id is not a batch's: use verify");
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString("utf8"));
    } catch {
      throw new WebhookVerificationError("the body is not JSON");
    }
    const items = (parsed as { deliveries?: unknown } | null)?.deliveries;
    if (!Array.isArray(items)) throw new WebhookVerificationError("the body has no deliveries list");
    if (found.get("hourglass-batch-size")?.trim() !== String(items.length)) {
      throw new WebhookVerificationError("hourglass-batch-size does not count the signed deliveries");
    }
    return items.map((item: unknown) => batchItem(item, timestamp));
  }

  #check(
    body: string | Uint8Array,
    headers: HeadersLike,
    now: number | undefined,
  ): { id: string; timestamp: number; raw: Buffer; found: Map<string, string> } {
    const raw = toBytes(body);
    const found = collect(headers);
    const id = required(found, "webhook-id");
    const stamp = required(found, "webhook-timestamp");
    const signatures = required(found, "webhook-signature");
    if (!/^-?\d+$/.test(stamp)) throw new WebhookVerificationError("webhook-timestamp is not unix seconds");
    const timestamp = Number(stamp);
    const current = now ?? Date.now() / 1000;
    if (timestamp < current - this.toleranceSeconds) throw new WebhookVerificationError("webhook-timestamp is too old");
    if (timestamp > current + this.toleranceSeconds) throw new WebhookVerificationError("webhook-timestamp is in the future");
    const signed = Buffer.concat([Buffer.from(`${id}.${stamp}.`), raw]);
    if (!matches(this.#keys, signed, signatures)) throw new WebhookVerificationError("no signature matches");
    return { id, timestamp, raw, found };
  }

  /** `[object]` rather than the secrets when logged. */
  toJSON(): Record<string, unknown> {
    return { secrets: this.#keys.length, toleranceSeconds: this.toleranceSeconds };
  }
}

/**
 * Whether any `v1,<base64>` of a space-separated signature header is the HMAC-SHA256 of `signed`
 * under any of `keys`.
 */
function matches(keys: Buffer[], signed: Buffer, header: string): boolean {
  const expected = keys.map((k) => createHmac("sha256", k).update(signed).digest());
  for (const token of header.split(/\s+/)) {
    // A trailing comma: repeated headers joined with ", " (Node, fetch). Base64 has none.
    const candidate = token.replace(/,+$/, "");
    const comma = candidate.indexOf(",");
    if (comma < 0 || candidate.slice(0, comma) !== "v1") continue;
    const encoded = candidate.slice(comma + 1);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) continue;
    const given = Buffer.from(encoded, "base64");
    let match = false;
    for (const e of expected) {
      // Every key is compared; the comparison itself takes constant time.
      if (e.length === given.length && timingSafeEqual(e, given)) match = true;
    }
    if (match) return true;
  }
  return false;
}

function required(headers: Map<string, string>, name: string): string {
  const value = headers.get(name)?.trim();
  if (!value) throw new WebhookVerificationError(`missing header ${name}`);
  return value;
}

/** The job id and due instant a delivery id names. */
function parseDeliveryId(deliveryId: string, what: string): { jobId: string; dueAt: Date } {
  const match = DELIVERY_ID.exec(deliveryId);
  if (!match) throw new WebhookVerificationError(`${what} is not an hourglass delivery id`);
  const hex = match[1]!;
  const jobId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { jobId, dueAt: new Date(Number(match[2])) };
}

/** One item of a verified batch: its facts must agree with its delivery id. */
function batchItem(item: unknown, timestamp: number): Delivery {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    throw new WebhookVerificationError("a batch item is not an object");
  }
  const fields = item as Record<string, unknown>;
  if (typeof fields.id !== "string") throw new WebhookVerificationError("a batch item has no id");
  const { jobId, dueAt } = parseDeliveryId(fields.id, "a batch item's id");
  if (typeof fields.job_id !== "string" || fields.job_id.toLowerCase() !== jobId) {
    throw new WebhookVerificationError("a batch item's job_id does not match its id");
  }
  if (typeof fields.due_at !== "string" || Date.parse(fields.due_at) !== dueAt.getTime()) {
    throw new WebhookVerificationError("a batch item's due_at does not match its id");
  }
  if (typeof fields.attempt !== "number" || !Number.isInteger(fields.attempt) || fields.attempt < 1) {
    throw new WebhookVerificationError("a batch item's attempt is not a positive whole number");
  }
  if (fields.job_type !== undefined && typeof fields.job_type !== "string") {
    throw new WebhookVerificationError("a batch item's job_type is not a string");
  }
  return {
    deliveryId: fields.id,
    jobId,
    type: fields.job_type ?? null,
    attempt: fields.attempt,
    dueAt,
    timestamp,
    payload: (fields.payload ?? null) as Json,
  };
}

function delivery(deliveryId: string, timestamp: number, raw: Buffer, headers: Map<string, string>): Delivery {
  const { jobId, dueAt } = parseDeliveryId(deliveryId, "webhook-id");
  const headerJob = headers.get("hourglass-job-id");
  if (headerJob !== undefined && headerJob.trim().toLowerCase() !== jobId) {
    throw new WebhookVerificationError("hourglass-job-id does not match the signed webhook-id");
  }
  const headerDue = headers.get("hourglass-due-at");
  if (headerDue !== undefined && Date.parse(headerDue.trim()) !== dueAt.getTime()) {
    throw new WebhookVerificationError("hourglass-due-at does not match the signed webhook-id");
  }
  const attemptText = required(headers, "hourglass-attempt");
  if (!/^\d+$/.test(attemptText.trim())) throw new WebhookVerificationError("hourglass-attempt is not a number");
  let payload: Json = null;
  const text = raw.toString("utf8");
  if (text.trim() !== "") {
    try {
      payload = JSON.parse(text) as Json;
    } catch {
      throw new WebhookVerificationError("the body is not JSON");
    }
  }
  return {
    deliveryId,
    jobId,
    type: headers.get("hourglass-job-type")?.replace(/^[ \t]+|[ \t]+$/g, "") || null,
    attempt: Number(attemptText.trim()),
    dueAt,
    timestamp,
    payload,
  };
}
