/** The survey list (#/ and #/?show=N): newest first, with a link to show more. */
import { api } from "/static/api.js";
import { h } from "/static/dom.js";
import { dateTime, num, t } from "/static/i18n.js";
import { app, session } from "/static/session.js";

/** A survey taking suggestions: how many wait for a moderator, when the list says. */
const suggestionsCell = (pending) =>
  typeof pending === "number" ? t("list.pending", { n: pending }) : t("list.suggestions_on");

export async function listView() {
  const wrap = h(
    "section",
    { "aria-labelledby": "surveys-h" },
    h("h2", { id: "surveys-h" }, t("list.title")),
  );
  app.replaceChildren(wrap);
  const limit = Number(new URLSearchParams(location.hash.split("?")[1] || "").get("show")) || 100;
  const data = await api("GET", `/v1/surveys?limit=${Math.min(limit, 1000)}`);
  if (!data.surveys.length) {
    const admin = session.role === "admin";
    wrap.append(
      h(
        "p",
        {},
        admin ? `${t("list.empty")} ` : t("list.empty"),
        admin ? h("a", { href: "#/new" }, t("list.create")) : null,
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
      h("td", {}, t(`kind.${s.kind}`)),
      h("td", {}, h("span", { class: `badge ${s.status}` }, t(`status.${s.status}`))),
      h(
        "td",
        {},
        t(`model.${s.privacy.model}`) +
          (["unlimited", "unset"].includes(s.privacy.respondent_budget_policy)
            ? ` · ${t("list.no_cap")}`
            : ""),
      ),
      h("td", { class: "num" }, num(s.n_items)),
      h("td", {}, dateTime(s.created_at)),
      participatory
        ? h(
            "td",
            { class: "pending" },
            !s.suggestions?.enabled ? "–" : suggestionsCell(s.pending_suggestions),
          )
        : null,
    ),
  );
  const columns = ["title", "kind", "status", "privacy", "items", "created"];
  if (participatory) columns.push("suggestions");
  wrap.append(
    h(
      "div",
      { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("list.title") },
      h(
        "table",
        {},
        h("caption", { class: "visually-hidden" }, t("list.caption")),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...columns.map((c) =>
              h("th", { scope: "col", class: c === "items" ? "num" : null }, t(`list.col.${c}`)),
            ),
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
        `${t("list.showing", { shown: data.surveys.length, total: data.total })} `,
        h("a", { href: `#/?show=${Math.min(1000, data.surveys.length * 2)}` }, t("list.show_more")),
      ),
    );
  }
}
