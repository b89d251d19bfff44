/**
 * Test fixtures: a real node (the `hourglass` binary from `HOURGLASS_BIN`, default
 * `../../target/debug/hourglass` from the SDK's directory) on a free loopback port, in
 * development mode (with a config file of its own when given one); a fresh namespace per test; a
 * webhook receiver on 127.0.0.1.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@hourglass/client";

/** The SDK's directory (tests run compiled, from build/test/). */
export const SDK_DIR = resolve(fileURLToPath(new URL(".", import.meta.url)), "../..");
export const REPO_DIR = resolve(SDK_DIR, "../..");

export function hourglassBin(): string {
  const path = resolve(SDK_DIR, process.env["HOURGLASS_BIN"] ?? "../../target/debug/hourglass");
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`no hourglass binary at ${path}: build it (cargo build -p hourglass) or set HOURGLASS_BIN`);
  }
  return path;
}

export interface Node {
  url: string;
  log: string[];
  stop(): Promise<void>;
}

export interface NodeOptions {
  /** The text of a config file (TOML) to start the node with. */
  config?: string;
}

/** Starts a node and resolves with its address once it listens. */
export async function startNode(options: NodeOptions = {}): Promise<Node> {
  const dataDir = mkdtempSync(join(tmpdir(), "hourglass-node-test-"));
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("HOURGLASS_")) env[k] = v;
  env["HOURGLASS_LOG"] = "warn";
  const args = ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir];
  if (options.config !== undefined) {
    const configFile = join(dataDir, "hourglass.toml");
    writeFileSync(configFile, options.config);
    args.push("--config", configFile);
  }
  const child: ChildProcess = spawn(hourglassBin(), args, {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log: string[] = [];
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`the node did not start:\n${log.join("")}`)), 60_000);
    const onData = (chunk: Buffer) => {
      log.push(chunk.toString());
      const match = /hourglass listening on (http:\/\/\S+)/.exec(log.join(""));
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`the node exited (${code}):\n${log.join("")}`)));
  });
  return {
    url,
    log,
    async stop() {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
      if (log.join("").includes("panicked")) throw new Error(`the node panicked:\n${log.join("")}`);
    },
  };
}

export function namespace(): string {
  return `t-${randomUUID().slice(0, 12)}`;
}

export function clientFor(node: Node, ns = namespace()): Client {
  return new Client(node.url, { namespace: ns });
}

/** Polls `probe` until it returns something truthy, or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T> | T, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A webhook receiver on 127.0.0.1 that records each request and answers `status`. */
export class Receiver {
  status = 200;
  readonly #received: Received[] = [];
  #waiter: (() => void) | undefined;
  readonly #server: Server;
  url = "";

  constructor() {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.#received.push({ path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) });
        this.#waiter?.();
        res.writeHead(this.status, { "content-length": "0" }).end();
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(0, "127.0.0.1", r));
    const address = this.#server.address();
    if (address === null || typeof address === "string") throw new Error("no address");
    this.url = `http://127.0.0.1:${address.port}`;
    return this;
  }

  async next(timeoutMs = 20_000): Promise<Received> {
    const deadline = Date.now() + timeoutMs;
    while (this.#received.length === 0) {
      if (Date.now() > deadline) throw new Error(`no webhook delivery within ${timeoutMs} ms`);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((r) => (this.#waiter = r)),
        new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now())))),
      ]);
      clearTimeout(timer);
    }
    return this.#received.shift()!;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((r) => this.#server.close(r));
  }
}

/** A logger that keeps the worker's reports for assertions instead of printing them. */
export function quietLogger(): { lines: string[]; info(m: string): void; warn(m: string): void; error(m: string): void } {
  const lines: string[] = [];
  return {
    lines,
    info: (m) => lines.push(`info ${m}`),
    warn: (m) => lines.push(`warn ${m}`),
    error: (m) => lines.push(`error ${m}`),
  };
}
