/**
 * An AWS Lambda handler behind a function URL: the node delivers webhooks to the URL, the
 * handler verifies the signature and dispatches on the job type.
 *
 * Configure the job's target as `{"webhook": {"url": "https://<id>.lambda-url.<region>.on.aws/"}}`
 * and the function's environment with HOURGLASS_SIGNING_SECRET (from `hourglass signing-secret`;
 * during a rotation, both secrets separated by a space). No dependency besides this package.
 */

import { type Delivery, WebhookVerificationError, WebhookVerifier } from "@hourglass/client";

/** The parts of a function URL event (payload format 2.0) this handler reads. */
export interface FunctionUrlEvent {
  headers: Record<string, string | undefined>;
  body?: string;
  isBase64Encoded: boolean;
}

export interface FunctionUrlResult {
  statusCode: number;
  body: string;
}

const handlers: Record<string, (delivery: Delivery) => Promise<void>> = {
  "reminder.flight": async (delivery) => {
    const { passenger, flight } = delivery.payload as { passenger: string; flight: string };
    console.log(`remind ${passenger} of ${flight} (delivery ${delivery.deliveryId}, attempt ${delivery.attempt})`);
  },
  "licence.expire": async (delivery) => {
    console.log(`expire licence ${JSON.stringify(delivery.payload)}`);
  },
};

let verifier: WebhookVerifier | undefined;

export async function handler(event: FunctionUrlEvent): Promise<FunctionUrlResult> {
  verifier ??= new WebhookVerifier((process.env["HOURGLASS_SIGNING_SECRET"] ?? "").split(/\s+/).filter(Boolean));
  // The signature covers the body byte for byte: verify what arrived, before any parsing.
  const body = Buffer.from(event.body ?? "", event.isBase64Encoded ? "base64" : "utf8");
  let delivery: Delivery;
  try {
    delivery = verifier.verify(body, event.headers);
  } catch (e) {
    if (e instanceof WebhookVerificationError) return { statusCode: 401, body: e.message };
    throw e;
  }
  const run = delivery.type === null ? undefined : handlers[delivery.type];
  if (run === undefined) {
    // 4xx other than 408/425/429 is permanent: the occurrence is dead-lettered, not retried.
    return { statusCode: 422, body: `no handler for type ${String(delivery.type)}` };
  }
  // A thrown error becomes a 5xx from Lambda: the node retries with backoff. Deliveries are at
  // least once, so handlers deduplicate on delivery.deliveryId when acting twice would hurt.
  await run(delivery);
  return { statusCode: 200, body: "ok" };
}
