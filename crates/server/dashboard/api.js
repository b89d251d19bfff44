// The API layer: the caller's credentials (namespace and key, kept for the tab in sessionStorage)
// and one fetch helper that sends them with every /v1 call and turns an error answer into an
// ApiError with the API's code and message; a 403 (the key's role or scope may not) keeps the
// node's message, which names the roles that may.

// Rows per page of the lists the dashboard pages through (jobs, dead letters, queue messages).
export const PAGE_SIZE = 50;

export const store = window.sessionStorage;

export function credentials() {
  return {
    namespace: store.getItem("hourglass.namespace") || "",
    key: store.getItem("hourglass.key") || "",
  };
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const { namespace, key } = credentials();
  const headers = { accept: "application/json" };
  if (namespace) headers["hourglass-namespace"] = namespace;
  if (key) headers.authorization = `Bearer ${key}`;
  const init = { method, headers };
  // The node wants the JSON type on every write, also without a body (pause, trigger, replay).
  if (method !== "GET" && method !== "HEAD") headers["content-type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const err = data && data.error ? data.error : {};
    let message = err.message || `${response.status} ${response.statusText}`;
    if (response.status === 401) message += " — enter an API key above";
    throw new ApiError(response.status, err.code || "http_error", message);
  }
  return data;
}

// The answer of a call a key's role may not make, as null: `refused` gets the ApiError, whose
// message names the roles that may. Any other failure is thrown.
export async function unlessRefused(call, refused) {
  try {
    return await call;
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 403) throw err;
    refused(err);
    return null;
  }
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    // An array is a parameter that repeats (`label`).
    for (const one of Array.isArray(v) ? v : [v]) {
      if (one !== undefined && one !== null && one !== "") q.append(k, String(one));
    }
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}
