/**
 * The dashboard's side of the API: a fetch wrapper that sends the stored key, CSV
 * downloads, who the key belongs to, and how a failed request is shown.
 */
import { h } from "/static/dom.js";
import { num, t } from "/static/i18n.js";
import { PrivrankError } from "/static/privrank.js";
import { forgetKey, session, storedKey } from "/static/session.js";

export class ApiError extends Error {
  constructor(status, detail, code = null) {
    super(PrivrankError.describe(detail));
    this.status = status;
    this.code = code;
  }
}

/**
 * What a request made or answered after signing out fails with: nothing is sent without
 * a key, and an answer that arrives once the tab signed out (or in with another key) is
 * never drawn over the sign-in form. The router ignores it, as it ignores any 401.
 */
function signedOut() {
  return new ApiError(401, t("signin.signed_out"), "signed_out");
}

/** A JSON request with the stored key; a 401 forgets the key and goes back to signing in. */
export async function api(method, path, body) {
  const key = storedKey();
  if (!key) throw signedOut();
  const headers = { Accept: "application/json", Authorization: `Bearer ${key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await r.json().catch(() => ({}));
  if (storedKey() !== key) throw signedOut();
  if (!r.ok) {
    if (r.status === 401) {
      forgetKey();
      session.route();
    }
    throw new ApiError(r.status, data.detail ?? r.statusText, data.code ?? null);
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

/** Why a credential that is no dashboard key cannot sign in, by its role ("errors.not_dashboard.<role>"). */
const NOT_A_DASHBOARD_KEY = ["integration", "respondent", "site"];

/**
 * The stored key's role: "admin", "analyst" or "moderator" (other credentials cannot use
 * the dashboard and get a 403 saying what they are; a moderator sees only the surveys'
 * moderation).
 */
export async function whoAmI() {
  const me = await api("GET", "/v1/whoami");
  if (!["admin", "analyst", "moderator"].includes(me.role)) {
    throw new ApiError(
      403,
      t(NOT_A_DASHBOARD_KEY.includes(me.role) ? `errors.not_dashboard.${me.role}` : "errors.not_dashboard"),
    );
  }
  return me.role;
}

/** Replaces `where`'s content by the error, as an alert. */
export function showError(where, err) {
  where.replaceChildren(h("p", { class: "error", role: "alert" }, err.message || String(err)));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether an answer is a job (the 202 of an endpoint that handed long work to one). */
export function isJob(data) {
  return (
    data !== null &&
    typeof data === "object" &&
    typeof data.id === "string" &&
    data.id.startsWith("job_") &&
    "progress" in data
  );
}

/**
 * Follows a job (GET /v1/jobs/{id} every half second) until it ends, showing its
 * progress bar and a Cancel button in `where`; resolves to the job's result, or
 * throws with the reason it failed or was cancelled.
 */
export async function followJob(job, where, label) {
  const fill = h("span"); // its width is set through the CSSOM (the pages' CSP allows no inline styles)
  const bar = h(
    "div",
    {
      class: "progress",
      id: "job-progress",
      role: "progressbar",
      "aria-valuemin": 0,
      "aria-valuemax": 100,
      "aria-valuenow": Math.round(100 * job.progress),
      "aria-label": label,
    },
    fill,
  );
  const text = h("span", { id: "job-progress-text" }, t("job.queued"));
  const cancel = h(
    "button",
    {
      type: "button",
      class: "secondary",
      id: "job-cancel",
      onclick: async () => {
        cancel.disabled = true;
        await api("DELETE", `/v1/jobs/${job.id}`).catch(() => {});
      },
    },
    t("job.cancel"),
  );
  where.replaceChildren(
    h(
      "div",
      { class: "job", id: "job" },
      h("p", { class: "hint" }, label),
      bar,
      h("p", {}, text, " ", cancel),
    ),
  );
  const started = Date.now();
  for (;;) {
    if (!where.isConnected) throw new ApiError(0, t("job.left")); // nobody is watching: stop polling
    const pct = Math.round(100 * job.progress);
    fill.style.width = `${pct}%`;
    bar.setAttribute("aria-valuenow", String(pct));
    text.textContent =
      job.status === "queued"
        ? t("job.waiting")
        : t("job.done", { pct: num(pct / 100, { style: "percent" }) });
    if (job.status === "done") return job.result;
    if (job.status === "failed") throw new ApiError(500, t("job.failed", { error: job.error }));
    if (job.status === "cancelled") throw new ApiError(409, t("job.cancelled"));
    await sleep(Date.now() - started < 10_000 ? 500 : 2000); // closely at first, then every 2 s
    job = await api("GET", `/v1/jobs/${job.id}`);
  }
}

/** A GET whose long work the server may hand to a job (202): the answer either way. */
export async function apiOrJob(path, where, label) {
  const data = await api("GET", path);
  return isJob(data) ? await followJob(data, where, label) : data;
}
