/**
 * The dashboard's side of the API: a fetch wrapper that sends the stored key, CSV
 * downloads, who the key belongs to, and how a failed request is shown.
 */
import { h } from "/static/dom.js";
import { PrivrankError } from "/static/privrank.js";
import { forgetKey, session, storedKey } from "/static/session.js";

export class ApiError extends Error {
  constructor(status, detail) {
    super(PrivrankError.describe(detail));
    this.status = status;
  }
}

/** A JSON request with the stored key; a 401 forgets the key and goes back to signing in. */
export async function api(method, path, body) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${storedKey() || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    if (r.status === 401) {
      forgetKey();
      session.route();
    }
    throw new ApiError(r.status, data.detail ?? r.statusText);
  }
  return data;
}

/** Download a CSV through fetch (the key stays in a header), then hand it to the browser. */
export async function download(path, filename) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${storedKey()}` } });
  if (!r.ok) throw new ApiError(r.status, (await r.json().catch(() => ({}))).detail ?? r.statusText);
  const url = URL.createObjectURL(await r.blob());
  const a = h("a", { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** The stored key's role: "admin" or "analyst" (other credentials cannot use the dashboard). */
export async function whoAmI() {
  const me = await api("GET", "/v1/whoami");
  if (me.role !== "admin" && me.role !== "analyst") {
    throw new ApiError(
      403,
      "the dashboard needs an admin or analyst key (this is a respondent or site credential)",
    );
  }
  return me.role;
}

/** Replaces `where`'s content by the error, as an alert. */
export function showError(where, err) {
  where.replaceChildren(h("p", { class: "error", role: "alert" }, err.message || String(err)));
}
