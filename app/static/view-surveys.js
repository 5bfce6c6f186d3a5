/** The survey list (#/ and #/?show=N): newest first, with a link to show more. */
import { api } from "/static/api.js";
import { h } from "/static/dom.js";
import { app, session } from "/static/session.js";

/** A survey taking suggestions: how many wait for a moderator, when the list says. */
const suggestionsCell = (pending) => (typeof pending === "number" ? `${pending} to review` : "on");

export async function listView() {
  const wrap = h("section", { "aria-labelledby": "surveys-h" }, h("h2", { id: "surveys-h" }, "Surveys"));
  app.replaceChildren(wrap);
  const limit = Number(new URLSearchParams(location.hash.split("?")[1] || "").get("show")) || 100;
  const data = await api("GET", `/v1/surveys?limit=${Math.min(limit, 1000)}`);
  if (!data.surveys.length) {
    const admin = session.role === "admin";
    wrap.append(
      h(
        "p",
        {},
        admin ? "No surveys yet. " : "No surveys yet.",
        admin ? h("a", { href: "#/new" }, "Create one") : null,
      ),
    );
    return;
  }
  // Surveys taking suggestions get a column of the suggestions waiting for a moderator.
  const participatory = data.surveys.some((s) => s.suggestions?.enabled);
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
      participatory
        ? h(
            "td",
            { class: "pending" },
            !s.suggestions?.enabled ? "–" : suggestionsCell(s.pending_suggestions),
          )
        : null,
    ),
  );
  const columns = ["Title", "Kind", "Status", "Privacy", "Items", "Created"];
  if (participatory) columns.push("Suggestions");
  wrap.append(
    h(
      "div",
      { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Surveys" },
      h(
        "table",
        {},
        h("caption", { class: "visually-hidden" }, "All surveys, newest first"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...columns.map((t) => h("th", { scope: "col", class: t === "Items" ? "num" : null }, t)),
          ),
        ),
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
