/**
 * The admin/analyst dashboard: sign in with a key (kept in sessionStorage, sent only
 * as an Authorization header — never in a URL), list and create surveys, and per
 * survey: progress, coverage, the ranking with intervals, the win-probability
 * matrix, releases and the budget (central surveys), consensus methods (ranking
 * surveys), exports, open/close. Routes live in the URL hash: #/, #/new, #/survey/{id}.
 */
import { budgetBar, errorBarChart, heatmap, hiddenTable } from "/static/charts.js";
import { PrivrankError, truthProbability } from "/static/privrank.js";

const KEY = "privrank.key";
const app = document.getElementById("app");
const statusRegion = document.getElementById("status");
let role = null; // "admin" or "analyst"

// -- small DOM helpers ---------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

const fmt = (x, d = 2) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
/** A probability as a percentage that never claims certainty: "<1%" and ">99%" at the ends. */
const pct = (x) => (x < 0.01 ? "<1%" : x > 0.99 ? ">99%" : `${(100 * x).toFixed(0)}%`);

function announce(text) {
  statusRegion.textContent = text;
}

function showError(where, err) {
  where.replaceChildren(h("p", { class: "error", role: "alert" }, err.message || String(err)));
}

// -- the API ---------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(PrivrankError.describe(detail));
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    if (r.status === 401) {
      sessionStorage.removeItem(KEY);
      route();
    }
    throw new ApiError(r.status, data.detail ?? r.statusText);
  }
  return data;
}

/** Download a CSV through fetch (the key stays in a header), then hand it to the browser. */
async function download(path, filename) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY)}` } });
  if (!r.ok) throw new ApiError(r.status, (await r.json().catch(() => ({}))).detail ?? r.statusText);
  const url = URL.createObjectURL(await r.blob());
  const a = h("a", { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// -- sign in -----------------------------------------------------------------------------------

async function whoAmI() {
  const me = await api("GET", "/v1/whoami");
  if (me.role !== "admin" && me.role !== "analyst") {
    throw new ApiError(403, "the dashboard needs an admin or analyst key (this is a respondent or site credential)");
  }
  return me.role;
}

function signInView(message) {
  const msg = h("p", { id: "signin-msg", class: message ? "error" : "hint", role: message ? "alert" : null }, message || "");
  const form = h(
    "form",
    { id: "signin", "aria-describedby": "signin-help" },
    h("h2", {}, "Sign in"),
    h(
      "p",
      { id: "signin-help", class: "hint" },
      "Use an admin key or an analyst key. It is kept only in this tab (session storage) and sent as an " +
        "Authorization header; it never appears in a URL.",
    ),
    h("div", { class: "field" }, h("label", { for: "key" }, "API key"), h("input", { id: "key", type: "password", autocomplete: "off", required: true })),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
    msg,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, form.querySelector("#key").value.trim());
    try {
      role = await whoAmI();
      announce(`Signed in as ${role}`);
      route();
    } catch (err) {
      sessionStorage.removeItem(KEY);
      signInView(err.status === 401 ? "That key was not accepted." : err.message);
      return;
    }
  });
  app.replaceChildren(h("div", { class: "panel narrow" }, form));
  document.getElementById("sign-out").hidden = true;
  form.querySelector("#key").focus();
}

// -- the survey list ---------------------------------------------------------------------------

async function listView() {
  const wrap = h("section", { "aria-labelledby": "surveys-h" }, h("h2", { id: "surveys-h" }, "Surveys"));
  app.replaceChildren(wrap);
  const limit = Number(new URLSearchParams(location.hash.split("?")[1] || "").get("show")) || 100;
  const data = await api("GET", `/v1/surveys?limit=${Math.min(limit, 1000)}`);
  if (!data.surveys.length) {
    wrap.append(h("p", {}, role === "admin" ? "No surveys yet. " : "No surveys yet.", role === "admin" ? h("a", { href: "#/new" }, "Create one") : null));
    return;
  }
  const rows = data.surveys.map((s) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/survey/${s.id}` }, s.title)),
      h("td", {}, s.kind),
      h("td", {}, h("span", { class: `badge ${s.status}` }, s.status)),
      h("td", {}, s.privacy.model),
      h("td", { class: "num" }, String(s.n_items)),
      h("td", {}, new Date(s.created_at).toLocaleString()),
    ),
  );
  wrap.append(
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        {},
        h("caption", { class: "visually-hidden" }, "All surveys, newest first"),
        h("thead", {}, h("tr", {}, ...["Title", "Kind", "Status", "Privacy", "Items", "Created"].map((t) => h("th", { scope: "col", class: t === "Items" ? "num" : null }, t)))),
        h("tbody", {}, rows),
      ),
    ),
  );
  if (data.total > data.surveys.length) {
    wrap.append(
      h(
        "p",
        {},
        `Showing the newest ${data.surveys.length} of ${data.total}. `,
        h("a", { href: `#/?show=${Math.min(1000, data.surveys.length * 2)}` }, "Show more"),
      ),
    );
  }
}

// -- creating a survey ----------------------------------------------------------------------------

function epsilonMeaning(eps) {
  if (!(eps > 0)) return "";
  return `With ε = ${eps}, a single answer is truthful with probability e^ε/(1+e^ε) = ${pct(truthProbability(eps))}.`;
}

function newSurveyView() {
  if (role !== "admin") {
    app.replaceChildren(h("p", { class: "error" }, "Creating surveys needs an admin key."));
    return;
  }
  const num = (id, label, value, attrs = {}) =>
    h("div", { class: "field" }, h("label", { for: id }, label), h("input", { id, type: "number", step: "any", value, ...attrs }));
  const meaning = h("p", { id: "eps-meaning", class: "hint", "aria-live": "polite" }, epsilonMeaning(1));
  const local = h(
    "fieldset",
    { id: "local-fields" },
    h("legend", {}, "Local privacy (answers randomized before they are stored)"),
    num("eps-default", "ε given to respondents who do not choose", 1, { min: 0.001, max: 30 }),
    meaning,
    num("eps-min", "Smallest ε a respondent may choose", 0.5, { min: 0.001, max: 30 }),
    num("eps-max", "Largest ε a respondent may choose", 3, { min: 0.001, max: 30 }),
    num("budget", "Total ε one respondent may spend (empty: no cap)", "", { min: 0.001 }),
  );
  const central = h(
    "fieldset",
    { id: "central-fields", hidden: true },
    h("legend", {}, "Central privacy (true answers stored; only private releases leave)"),
    num("total-budget", "Total ε all releases may spend", 3, { min: 0.001, max: 100 }),
    num("max-comparisons", "Most comparisons one respondent may give (L)", 5, { min: 1, step: 1 }),
  );
  const plannerOut = h("div", { id: "plan-out", "aria-live": "polite" });
  const planner = h(
    "fieldset",
    { id: "planner" },
    h("legend", {}, "Accuracy preview (the planner)"),
    num("plan-respondents", "Respondents you expect", 200, { min: 1, step: 1 }),
    num("plan-pairs", "Pairs each answers", 10, { min: 1, step: 1 }),
    num("plan-k", "Size K of the top set you care about", 3, { min: 1, step: 1 }),
    h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", id: "plan-btn" }, "Preview accuracy")),
    plannerOut,
  );
  const error = h("div", { id: "create-error" });
  const form = h(
    "form",
    { id: "create-form" },
    h("h2", {}, "New survey"),
    h("div", { class: "field" }, h("label", { for: "title" }, "Title"), h("input", { id: "title", type: "text", required: true, maxlength: 500 })),
    h(
      "div",
      { class: "field" },
      h("label", { for: "items" }, "Items, one per line"),
      h("textarea", { id: "items", required: true, "aria-describedby": "items-hint" }),
      h("p", { id: "items-hint", class: "hint" }, "At least two; labels must be unique."),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Question"),
      h(
        "div",
        { class: "choice-row" },
        h("label", {}, h("input", { type: "radio", name: "kind", value: "pairwise", checked: true }), "Pairs (which of two matters more?)"),
        h("label", {}, h("input", { type: "radio", name: "kind", value: "ranking" }), "A ranking of all items"),
      ),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Privacy model"),
      h(
        "div",
        { class: "choice-row" },
        h("label", {}, h("input", { type: "radio", name: "model", value: "local", checked: true }), "Local (no one sees a true answer)"),
        h("label", {}, h("input", { type: "radio", name: "model", value: "central", id: "model-central" }), "Central (trusted operator)"),
      ),
    ),
    local,
    central,
    planner,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "create-btn" }, "Create survey")),
    error,
  );
  const val = (id) => form.querySelector(`#${id}`).value.trim();
  const kind = () => form.querySelector('input[name="kind"]:checked').value;
  const model = () => form.querySelector('input[name="model"]:checked').value;
  const sync = () => {
    const isCentral = model() === "central";
    local.hidden = isCentral;
    central.hidden = !isCentral;
    planner.hidden = isCentral || kind() !== "pairwise";
    const ranking = kind() === "ranking";
    form.querySelector("#model-central").disabled = ranking;
    if (ranking && isCentral) form.querySelector('input[name="model"][value="local"]').checked = true;
  };
  form.addEventListener("change", sync);
  form.querySelector("#eps-default").addEventListener("input", (ev) => {
    meaning.textContent = epsilonMeaning(Number(ev.target.value));
  });
  form.querySelector("#plan-btn").addEventListener("click", async () => {
    const items = val("items").split("\n").map((s) => s.trim()).filter(Boolean);
    if (items.length < 2) {
      plannerOut.replaceChildren(h("p", { class: "error" }, "List at least two items first."));
      return;
    }
    plannerOut.replaceChildren(h("p", { class: "hint" }, "Simulating…"));
    const allPairs = (items.length * (items.length - 1)) / 2;
    const q = new URLSearchParams({
      items: items.length,
      respondents: val("plan-respondents"),
      pairs_per_respondent: Math.min(Number(val("plan-pairs")), allPairs),
      epsilon: val("eps-default"),
      k: Math.min(Number(val("plan-k")), items.length),
    });
    try {
      const p = (await api("GET", `/v1/plan?${q}`)).plan;
      plannerOut.replaceChildren(
        h(
          "dl",
          { class: "stats" },
          h("div", {}, h("dt", {}, `P(exact top-${p.k} found)`), h("dd", {}, pct(p.p_exact_top_k.mean))),
          h("div", {}, h("dt", {}, "Pairs ordered wrongly"), h("dd", {}, pct(p.kendall_error.mean))),
          h("div", {}, h("dt", {}, "Comparisons per pair"), h("dd", {}, fmt(p.comparisons_per_pair, 1))),
          h("div", {}, h("dt", {}, "Each respondent's total ε"), h("dd", {}, fmt(p.respondent_epsilon_total[0], 2))),
        ),
        h(
          "p",
          { class: "hint" },
          `From ${p.replications} simulated surveys of ${p.n_respondents} respondents answering ${p.pairs_per_respondent} ` +
            `of the ${allPairs} pairs each.`,
        ),
        h("p", { class: "hint", id: "plan-assumption" }, p.assumption),
      );
    } catch (err) {
      showError(plannerOut, err);
    }
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const items = val("items").split("\n").map((s) => s.trim()).filter(Boolean);
    const privacy =
      model() === "central"
        ? { model: "central", total_budget: Number(val("total-budget")), max_comparisons_per_respondent: Number(val("max-comparisons")) }
        : {
            model: "local",
            epsilon_default: Number(val("eps-default")),
            epsilon_min: Number(val("eps-min")),
            epsilon_max: Number(val("eps-max")),
            respondent_budget: val("budget") === "" ? null : Number(val("budget")),
          };
    try {
      const s = await api("POST", "/v1/surveys", { title: val("title"), kind: kind(), items, privacy });
      announce(`Survey "${s.title}" created`);
      location.hash = `#/survey/${s.id}`;
    } catch (err) {
      showError(error, err);
      error.querySelector(".error").focus?.();
    }
  });
  app.replaceChildren(h("div", { class: "panel" }, form));
  sync();
  form.querySelector("#title").focus();
}

// -- one survey ----------------------------------------------------------------------------------

async function surveyView(id) {
  const s = await api("GET", `/v1/surveys/${encodeURIComponent(id)}`);
  const link = `${location.origin}/s/${s.id}`;
  const p = s.privacy;
  const m = s.items.length;
  const privacyText =
    p.model === "central"
      ? `Central model: true answers stored; releases spend a total budget of ε = ${p.total_budget}; each respondent gives at most ${p.max_comparisons_per_respondent} comparisons.`
      : s.kind === "ranking"
        ? `Local model: each ranking replaced by a Mallows copy at the respondent's ε in [${p.epsilon_min}, ${p.epsilon_max}] (default ${p.epsilon_default}: adjacent items swapped with probability ${pct(1 / (1 + Math.exp(p.epsilon_default / (m - 1))))}; ε·m/2 = ${p.epsilon_default * m / 2} between arbitrary rankings).`
        : `Local model: each answer randomized with the respondent's ε in [${p.epsilon_min}, ${p.epsilon_max}] (default ${p.epsilon_default}: truthful with probability ${pct(truthProbability(p.epsilon_default))})` +
          (p.respondent_budget ? `; each respondent spends at most ε = ${p.respondent_budget} in all.` : ".");
  const head = h(
    "section",
    { class: "panel", "aria-labelledby": "survey-title" },
    h("h2", { id: "survey-title" }, s.title, " ", h("span", { class: `badge ${s.status}`, id: "survey-status" }, s.status)),
    h("p", {}, `${s.kind === "ranking" ? "Ranking question" : "Pairwise questions"} over ${s.items.length} items. ${privacyText}`),
    h("p", {}, "Respondent link: ", h("a", { href: link, class: "mono", id: "respondent-link" }, link)),
  );
  const actions = h("div", { class: "actions" });
  if (role === "admin") {
    const closing = s.status === "open";
    actions.append(
      h(
        "button",
        {
          type: "button",
          id: "toggle-status",
          class: closing ? "danger" : null,
          onclick: async () => {
            if (closing && !confirm("Close this survey? New respondents and answers will be refused.")) return;
            try {
              await api("PATCH", `/v1/surveys/${s.id}`, { status: closing ? "closed" : "open" });
              announce(`Survey ${closing ? "closed" : "reopened"}`);
              await route();
              document.getElementById("toggle-status")?.focus();
            } catch (err) {
              announce(err.message);
              showError(actionError, err);
            }
          },
        },
        closing ? "Close survey" : "Reopen survey",
      ),
    );
  }
  if (p.model === "local") {
    const file = s.kind === "ranking" ? "rankings.csv" : "comparisons.csv";
    actions.append(
      h("button", { type: "button", class: "secondary", id: "export", onclick: () => download(`/v1/surveys/${s.id}/${file}`, `${s.id}-${file}`).catch((e) => announce(e.message)) }, `Export ${file}`),
    );
  }
  actions.append(
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        id: "refresh",
        onclick: async () => {
          await route();
          document.getElementById("refresh")?.focus();
        },
      },
      "Refresh",
    ),
  );
  const actionError = h("div", { id: "action-error" });
  head.append(actions, actionError);
  const body = h("div", { id: "survey-body" });
  app.replaceChildren(head, body);
  if (p.model === "central") await centralSections(s, body);
  else if (s.kind === "ranking") await rankingSurveySections(s, body);
  else await pairwiseSections(s, body);
}

function section(id, title, ...children) {
  return h("section", { class: "panel", "aria-labelledby": `${id}-h`, id }, h("h3", { id: `${id}-h` }, title), ...children);
}

function chartBox(svg) {
  return h("div", { class: "chart" }, svg);
}

/** Re-run `load` every 30 s while the tab is visible and this survey is still on screen. */
function autoRefresh(load) {
  const hash = location.hash;
  const timer = setInterval(() => {
    if (location.hash !== hash || !document.body.contains(document.getElementById("survey-title"))) {
      clearInterval(timer);
      return;
    }
    if (!document.hidden) load().catch(() => {});
  }, 30_000);
}

async function pairwiseSections(s, body) {
  const kInput = h("input", { id: "k", type: "number", min: 1, max: s.items.length, step: 1, value: Math.min(3, s.items.length) });
  const rankingBox = h("div", { id: "ranking-box" });
  const load = async () => {
    try {
      const r = await api("GET", `/v1/surveys/${s.id}/ranking?k=${kInput.value}`);
      rankingBox.replaceChildren(...rankingContent(r, Number(kInput.value)));
      progress.replaceChildren(progressContent(r.diagnostics));
    } catch (err) {
      showError(rankingBox, err);
    }
  };
  kInput.addEventListener("change", load);
  autoRefresh(load);
  const progress = h("div");
  body.append(
    section("progress", "Progress", progress, h("div", { id: "coverage-box" })),
    section("ranking", "Ranking", h("div", { class: "field" }, h("label", { for: "k" }, "Top-K size"), kInput), rankingBox),
    section("pairwise", "Who beats whom", h("div", { id: "pairwise-box" })),
    ...(s.items.length <= 100 ? [surveyPlanSection(s, kInput)] : []),
  );
  await load();
  try {
    const cov = await api("GET", `/v1/surveys/${s.id}/coverage`);
    const labels = cov.items.map((x) => x.label);
    body.querySelector("#coverage-box").replaceChildren(
      h("h4", {}, `Comparisons per pair (${cov.pairs_observed} of ${cov.pairs_total} pairs answered)`),
      chartBox(heatmap(cov.counts, labels, { title: "Coverage: comparisons per pair", desc: "Each cell counts the stored comparisons of the row and column items." })),
      hiddenTable(
        "Comparisons per pair",
        ["", ...labels],
        cov.counts.map((row, r) => [labels[r], ...row.map((v) => (v === null ? "–" : String(v)))]),
      ),
    );
  } catch (err) {
    showError(body.querySelector("#coverage-box"), err);
  }
  try {
    if (s.items.length <= 30) {
      const pw = await api("GET", `/v1/surveys/${s.id}/pairwise`);
      const box = body.querySelector("#pairwise-box");
      if (!pw.available) box.replaceChildren(h("p", { class: "hint" }, `No intervals yet: ${pw.message || pw.reason}`));
      else
        box.replaceChildren(
          h("p", { class: "hint" }, "Cell = estimated probability that the row item is preferred to the column item."),
          chartBox(heatmap(pw.probability, pw.items.map((x) => x.label), { title: "Win probabilities", desc: "Estimated probability that the row item beats the column item.", max: 1, format: (v) => v.toFixed(2) })),
          hiddenTable(
            "Estimated probability that the row item is preferred to the column item",
            ["", ...pw.items.map((x) => x.label)],
            pw.probability.map((row, r) => [pw.items[r].label, ...row.map((v) => (v === null ? "–" : v.toFixed(2)))]),
          ),
        );
    }
  } catch (err) {
    showError(body.querySelector("#pairwise-box"), err);
  }
}

/** "How many more respondents certify the top K?" — GET /v1/surveys/{id}/plan, with its assumption in words. */
function surveyPlanSection(s, kInput) {
  const target = h("input", { id: "plan-target", type: "number", min: 1, max: 99, step: 1, value: 80 });
  const out = h("div", { id: "survey-plan-out", "aria-live": "polite" });
  const run = async () => {
    const k = Math.min(Number(kInput.value), s.items.length - 1);
    out.replaceChildren(h("p", { class: "hint" }, "Simulating this survey…"));
    const q = new URLSearchParams({ k, target: Number(target.value) / 100 });
    try {
      const r = await api("GET", `/v1/surveys/${s.id}/plan?${q}`);
      const p = r.plan;
      const headline =
        r.solution === 0
          ? `The top ${k} is already certified with probability ${pct(p.p_certified.mean)}.`
          : r.reached
            ? `About ${r.solution} more respondents certify the top ${k} with probability ${pct(p.p_certified.mean)}.`
            : `Even ${p.added_respondents} more respondents would certify the top ${k} only with probability ${pct(p.p_certified.mean)}` +
              (r.search_limit === "work" ? " (the simulation stopped there: larger sizes exceed the work one request may do)." : ".");
      out.replaceChildren(
        h("p", { id: "survey-plan-answer" }, h("strong", {}, headline)),
        h(
          "dl",
          { class: "stats" },
          h("div", {}, h("dt", {}, `P(top ${k} certified)`), h("dd", {}, `${pct(p.p_certified.mean)} ± ${fmt(100 * p.p_certified.se, 0)} pts`)),
          h("div", {}, h("dt", {}, `P(estimated top ${k} right)`), h("dd", {}, pct(p.p_exact_top_k.mean))),
          h("div", {}, h("dt", {}, "Respondent effect τ"), h("dd", {}, fmt(r.tau))),
          h("div", {}, h("dt", {}, "Comparisons added"), h("dd", {}, String(p.added_comparisons))),
        ),
        h("p", { class: "hint", id: "survey-plan-assumption" }, p.assumption),
      );
    } catch (err) {
      showError(out, err);
    }
  };
  return section(
    "survey-plan",
    "How many more respondents?",
    h("p", { class: "hint" }, "Simulates this survey as it stands, plus new respondents, and counts how often its own intervals would certify the top K."),
    h("div", { class: "field" }, h("label", { for: "plan-target" }, "Wanted certainty (%)"), target),
    h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", id: "survey-plan-btn", onclick: run }, "Plan from here")),
    out,
  );
}

function progressContent(d) {
  return h(
    "dl",
    { class: "stats" },
    h("div", {}, h("dt", {}, "Respondents"), h("dd", { id: "stat-respondents" }, String(d.respondents))),
    h("div", {}, h("dt", {}, "Comparisons"), h("dd", { id: "stat-comparisons" }, String(d.comparisons))),
    h("div", {}, h("dt", {}, "Pairs answered"), h("dd", {}, `${d.pairs_observed} / ${d.pairs_total}`)),
    h("div", {}, h("dt", {}, "Connected"), h("dd", {}, d.connected ? "yes" : `no (${d.n_components} parts)`)),
    h("div", {}, h("dt", {}, "Connectivity (normalized)"), h("dd", {}, fmt(d.algebraic_connectivity_normalized))),
  );
}

function rankingContent(r, k) {
  const certain = new Set(r.top_k_certain || []);
  const rows = r.items.map((it) => ({
    label: it.label,
    value: it.score,
    lo: it.ci ? it.ci[0] : null,
    hi: it.ci ? it.ci[1] : null,
    note: it.rank_ci ? `rank ${it.rank} (${it.rank_ci[0]}–${it.rank_ci[1]})` : `rank ${it.rank}`,
  }));
  const out = [];
  if (r.diagnostics.comparisons === 0) {
    out.push(h("p", { class: "hint", id: "no-data" }, "No answers yet: the ranking appears as respondents answer."));
    return out;
  }
  if (!r.uncertainty.available && r.uncertainty.reason !== "not_requested") {
    out.push(
      h(
        "p",
        { class: "notice", id: "no-intervals", role: "status" },
        h("strong", {}, "Not enough data for intervals yet. "),
        r.uncertainty.message || r.uncertainty.reason,
        " The scores below are point estimates only: do not read their order as certain.",
      ),
    );
  } else if (r.uncertainty.available) {
    out.push(h("p", { class: "hint", id: "estimand" }, `Intervals are for ${r.uncertainty.estimand}.`));
  }
  out.push(
    chartBox(
      errorBarChart(rows, {
        title: "Estimated scores with confidence intervals",
        desc: `Items by estimated BTL score θ̂, best first, with ${pct(r.uncertainty.level)} confidence intervals and rank intervals.`,
        axisLabel: `score θ̂ with ${pct(r.uncertainty.level)} intervals`,
      }),
    ),
  );
  if (r.top_k) {
    out.push(
      h(
        "p",
        { id: "top-k" },
        h("strong", {}, `Top ${k}: `),
        r.items.slice(0, k).map((it, n) => h("span", { class: certain.has(it.item_id) ? "certain" : null }, (n ? ", " : "") + it.label)),
        h(
          "span",
          { class: "hint" },
          certain.size
            ? ` — ✓ marks items certainly in the top ${k} at the ${pct(r.uncertainty.level)} level (jointly).`
            : ` — no item is certainly in the top ${k} yet at the ${pct(r.uncertainty.level)} level (jointly).`,
        ),
      ),
    );
  }
  if (r.tied_groups) {
    const byId = Object.fromEntries(r.items.map((it) => [it.item_id, it.label]));
    const groups = r.tied_groups.filter((g) => g.length > 1);
    out.push(
      h(
        "p",
        {},
        h("strong", {}, "Statistically tied: "),
        groups.length
          ? groups.map((g) => `{${g.map((x) => byId[x]).join(", ")}}`).join("; ") +
              " (runs of items no two of which differ significantly; an item can be in several)"
          : "no two items are tied.",
      ),
    );
  }
  out.push(
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { id: "ranking-table" },
        h("caption", { class: "visually-hidden" }, "Ranking with intervals"),
        h("thead", {}, h("tr", {}, ...["Rank", "Item", "Score", "Interval", "Rank interval", `P(top ${k})`].map((t) => h("th", { scope: "col" }, t)))),
        h(
          "tbody",
          {},
          r.items.map((it) =>
            h(
              "tr",
              {},
              h("td", {}, String(it.rank)),
              h("td", {}, it.label),
              h("td", { class: "num" }, fmt(it.score)),
              h("td", {}, it.ci ? `${fmt(it.ci[0])} – ${fmt(it.ci[1])}` : "–"),
              h("td", {}, it.rank_ci ? `${it.rank_ci[0]}–${it.rank_ci[1]}` : "–"),
              h("td", { class: "num" }, it.p_top_k === null || it.p_top_k === undefined ? "–" : pct(it.p_top_k)),
            ),
          ),
        ),
      ),
    ),
  );
  return out;
}

async function rankingSurveySections(s, body) {
  const method = h(
    "select",
    { id: "method" },
    ...[
      ["borda", "Borda (mean position)"],
      ["kemeny", "Kemeny (closest in Kendall distance)"],
      ["btl", "BTL on implied pairs"],
      ["lehmer", "Lehmer majority"],
    ].map(([v, t]) => h("option", { value: v }, t)),
  );
  const box = h("div", { id: "ranking-box" });
  const load = async () => {
    try {
      const r = await api("GET", `/v1/surveys/${s.id}/ranking?method=${method.value}&k=${Math.min(3, s.items.length)}`);
      const d = r.diagnostics;
      const rows = r.items.map((it) => ({
        label: it.label,
        value: it.score ?? it.mean_position,
        lo: it.ci ? it.ci[0] : null,
        hi: it.ci ? it.ci[1] : null,
        note: `rank ${it.rank}, mean position ${fmt(it.mean_position)}`,
      }));
      box.replaceChildren(
        h(
          "dl",
          { class: "stats" },
          h("div", {}, h("dt", {}, "Rankings"), h("dd", { id: "stat-rankings" }, String(d.rankings))),
          h("div", {}, h("dt", {}, "Mean Kendall distance to the consensus"), h("dd", {}, fmt(d.mean_kendall_distance))),
          h("div", {}, h("dt", {}, "Smallest ε"), h("dd", {}, fmt(d.epsilon_min))),
        ),
        chartBox(
          errorBarChart(rows, {
            title: `Consensus by ${method.value}`,
            desc: "Items in consensus order with their score (or mean position) and intervals when available.",
            axisLabel: r.items[0].score === null ? "mean position (1 = best)" : "score",
          }),
        ),
        h("p", {}, h("strong", {}, "Order: "), r.items.map((it) => it.label).join(" > ")),
        r.uncertainty.available ? null : h("p", { class: "hint" }, `No intervals: ${r.uncertainty.reason}.`),
      );
    } catch (err) {
      if (err.status === 409) box.replaceChildren(h("p", { class: "hint", id: "no-data" }, "No rankings yet: the consensus appears as respondents answer."));
      else showError(box, err);
    }
  };
  method.addEventListener("change", load);
  autoRefresh(load);
  body.append(section("ranking", "Consensus", h("div", { class: "field" }, h("label", { for: "method" }, "Method"), method), box));
  await load();
  try {
    const page = await api("GET", `/v1/surveys/${s.id}/rounds`);
    const rounds = page.rounds;
    if (rounds.length)
      body.append(
        section(
          "rounds",
          "Federated rounds",
          h(
            "table",
            {},
            h("thead", {}, h("tr", {}, ...["Round", "Method", "Status", "Sites joined / contributed", "Consensus"].map((t) => h("th", { scope: "col" }, t)))),
            h(
              "tbody",
              {},
              rounds.map((x) =>
                h(
                  "tr",
                  {},
                  h("td", { class: "mono" }, x.id),
                  h("td", {}, x.method),
                  h("td", {}, x.status),
                  h("td", {}, `${x.sites.filter((z) => z.joined).length} / ${x.sites.filter((z) => z.contributed).length} of ${x.sites.length}`),
                  h("td", {}, x.result ? x.result.items.map((it) => it.label).join(" > ") : "–"),
                ),
              ),
            ),
          ),
          page.total > rounds.length ? h("p", { class: "hint" }, `The newest ${rounds.length} of ${page.total} rounds.`) : null,
        ),
      );
  } catch (err) {
    /* rounds are optional */
  }
}

async function centralSections(s, body) {
  const p_L = s.privacy.max_comparisons_per_respondent;
  const ledgerBox = h("div", { id: "ledger-box" });
  const latest = h("div", { id: "release-box" });
  const load = async () => {
    const ledger = await api("GET", `/v1/surveys/${s.id}/releases`);
    const b = ledger.budget;
    ledgerBox.replaceChildren(
      h("p", {}, `Spent ε = ${fmt(b.spent)} of ${fmt(b.total)}; ${fmt(b.remaining)} remains.`),
      budgetBar(b.spent, b.total),
      ledger.releases.length
        ? h(
            "table",
            { id: "ledger" },
            h("thead", {}, h("tr", {}, ...["When", "Method", "Unit", "ε", "Cost", "Top"].map((t) => h("th", { scope: "col" }, t)))),
            h(
              "tbody",
              {},
              ledger.releases.map((r) =>
                h(
                  "tr",
                  {},
                  h("td", {}, new Date(r.created_at).toLocaleString()),
                  h("td", {}, r.method),
                  h("td", {}, r.unit),
                  h("td", { class: "num" }, fmt(r.epsilon)),
                  h("td", { class: "num" }, fmt(r.cost)),
                  h("td", {}, r.top.slice(0, 3).map((it) => it.label).join(", ")),
                ),
              ),
            ),
          )
        : h("p", { class: "hint" }, "No releases yet."),
      ledger.total > ledger.releases.length ? h("p", { class: "hint" }, `The newest ${ledger.releases.length} of ${ledger.total} releases.`) : null,
    );
  };
  const form = h(
    "form",
    { id: "release-form" },
    h("div", { class: "field" }, h("label", { for: "rel-method" }, "Method"), h("select", { id: "rel-method" }, h("option", { value: "noisy_counts" }, "Noisy win counts (best for top-K)"), h("option", { value: "perturbed_mle" }, "Perturbed MLE (scores)"))),
    h("div", { class: "field" }, h("label", { for: "rel-unit" }, "What ε protects"), h("select", { id: "rel-unit" }, h("option", { value: "individual" }, "Everything one respondent answered"), h("option", { value: "edge" }, "One comparison (costs L·ε)"))),
    h("div", { class: "field" }, h("label", { for: "rel-eps" }, "ε of this release"), h("input", { id: "rel-eps", type: "number", step: "any", min: 0.001, max: 20, value: 0.5 })),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Make release")),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const eps = Number(form.querySelector("#rel-eps").value);
    const unit = form.querySelector("#rel-unit").value;
    const cost = unit === "edge" ? eps * p_L : eps;
    if (!confirm(`This release spends ε = ${cost} of the survey's privacy budget, irreversibly. Go on?`)) return;
    try {
      const r = await api("POST", `/v1/surveys/${s.id}/releases`, {
        method: form.querySelector("#rel-method").value,
        unit: form.querySelector("#rel-unit").value,
        epsilon: Number(form.querySelector("#rel-eps").value),
        k: Math.min(3, s.items.length),
      });
      latest.replaceChildren(
        h("p", {}, `Release ${r.id}: cost ε = ${fmt(r.cost)}.`),
        h("ol", {}, r.result.items.map((it) => h("li", {}, `${it.label} (${"score" in it ? `score ${fmt(it.score)}` : `noisy wins ${it.noisy_wins}`})`))),
      );
      await load();
    } catch (err) {
      showError(latest, err);
    }
  });
  body.append(
    section("budget", "Privacy budget and releases", ledgerBox),
    section("new-release", "New release", h("p", { class: "hint" }, "True answers never leave the service; a release is differentially private and spends budget."), form, latest),
  );
  await load();
}

// -- routing -------------------------------------------------------------------------------------

async function route() {
  if (!sessionStorage.getItem(KEY)) {
    signInView();
    return;
  }
  document.getElementById("sign-out").hidden = false;
  try {
    if (!role) role = await whoAmI();
    document.getElementById("nav-new").hidden = role !== "admin";
    const hash = location.hash || "#/";
    const m = hash.match(/^#\/survey\/([A-Za-z0-9_]+)$/);
    if (hash === "#/new") newSurveyView();
    else if (m) await surveyView(m[1]);
    else if (hash === "#/" || hash.startsWith("#/?")) await listView();
    else await listView();
  } catch (err) {
    if (err.status === 401) return;
    showError(app, err);
  }
}

document.getElementById("sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  role = null;
  location.hash = "#/";
  signInView();
});
window.addEventListener("hashchange", async () => {
  await route();
  // Move focus into the new view for keyboard and screen-reader users, unless the view
  // already focused its first field.
  if (!app.contains(document.activeElement)) app.focus();
});
route();
