/**
 * A participatory survey's moderation (admins and moderators): the respondents'
 * suggestions with their near-duplicates — approve (after editing), reject with a
 * reason, merge into an item — and the items reported or hidden, to restore or hide.
 * Also the read-only list of every item with its source, status and reports.
 */
import { api, showError } from "/static/api.js";
import { announce, h, section } from "/static/dom.js";
import { language, num, t, tn } from "/static/i18n.js";
import { session } from "/static/session.js";

/** An item's source and status in words ("moderation.source.<source>", "moderation.status.<status>"). */
const SOURCES = ["seed", "added", "suggested"];
const STATUSES = ["live", "hidden", "review", "archived"];
const sourceText = (source) => (SOURCES.includes(source) ? t(`moderation.source.${source}`) : source);
const statusText = (status) => (STATUSES.includes(status) ? t(`moderation.status.${status}`) : status);
/** A suggestion's status in words ("moderation.filter.<status>"). */
const SUGGESTION_STATUSES = ["pending", "approved", "rejected", "merged"];
const suggestionStatus = (status) =>
  SUGGESTION_STATUSES.includes(status) ? t(`moderation.filter.${status}`) : status;

/** A date and time (the service rounds a suggestion's arrival down to the hour). */
const hour = (iso) => new Date(iso).toLocaleString(language(), { dateStyle: "medium", timeStyle: "short" });

const moderates = () => session.role === "admin" || session.role === "moderator";

/** Whether a survey has anything to moderate: suggestions on, or items reported or hidden. */
export function hasModeration(s) {
  return Boolean(s.suggestions?.enabled) || s.items.some((it) => it.status && it.status !== "live");
}

/** One near-duplicate: its label, whether it is an item or a suggestion, how similar. */
function similarHint(x) {
  return h(
    "li",
    { class: "similar-one" },
    t("moderation.quoted", { label: x.label }),
    " ",
    h("span", { class: "hint" }, t(x.item_id ? "moderation.similar.item" : "moderation.similar.suggestion")),
    " ",
    h(
      "span",
      { class: "similarity" },
      t("moderation.similar", {
        similarity: num(Math.round(100 * x.similarity) / 100, { style: "percent" }),
      }),
    ),
    x.same_text ? h("span", { class: "badge same-text" }, t("moderation.same_text")) : null,
  );
}

/**
 * The moderation section: returns {node, load}. `onChange` runs after each decision
 * (the caller refreshes what depends on the items).
 */
export function moderationSection(s, onChange = async () => {}) {
  let items = s.items;
  const filter = h(
    "select",
    { id: "suggestion-filter" },
    ["pending", "approved", "rejected", "merged", "all"].map((v) =>
      h("option", { value: v, selected: v === "pending" }, t(`moderation.filter.${v}`)),
    ),
  );
  const count = h("p", { id: "suggestions-count", role: "status" });
  const list = h("ul", { class: "suggestions", id: "suggestions" });
  const listError = h("div", { id: "suggestions-error" });
  const review = h("div", { id: "review-box" });
  const byId = () => Object.fromEntries(items.map((it) => [it.id, it.label]));

  const decide = async (what, path, body, card) => {
    const err = card.querySelector(".card-error");
    err.replaceChildren();
    try {
      await api(path[0], path[1], body);
      announce(what);
      await load();
      await onChange();
    } catch (e) {
      showError(err, e);
    }
  };

  function card(sug) {
    const base = `/v1/surveys/${s.id}/suggestions/${encodeURIComponent(sug.id)}`;
    const labelText = h("span", { class: "sugg-label" }, sug.label);
    const editor = h("div", { class: "editor" });
    const node = h(
      "li",
      { class: "suggestion", "data-id": sug.id, "data-status": sug.status },
      h(
        "p",
        { class: "sugg-head" },
        labelText,
        " ",
        sug.status === "pending"
          ? null
          : h("span", { class: `badge ${sug.status}` }, suggestionStatus(sug.status)),
      ),
      h(
        "p",
        { class: "hint" },
        [
          t("moderation.received", { when: hour(sug.received_at) }),
          sug.decided_at ? t("moderation.decided", { when: hour(sug.decided_at) }) : null,
          sug.item_id ? t("moderation.item", { label: byId()[sug.item_id] ?? sug.item_id }) : null,
          sug.reason ? t("moderation.reason", { reason: sug.reason }) : null,
        ]
          .filter(Boolean)
          .join(t("moderation.separator")),
        t("moderation.end"),
      ),
      sug.similar?.length
        ? h(
            "div",
            { class: "similar" },
            h("span", { class: "similar-h" }, t("moderation.near_duplicates")),
            " ",
            h("ul", {}, sug.similar.map(similarHint)),
          )
        : null,
    );
    const err = h("div", { class: "card-error" });
    if (sug.status !== "pending" || !moderates()) {
      node.append(err);
      return node;
    }
    const open = (...children) => {
      editor.replaceChildren(...children);
      editor.querySelector("input, select")?.focus();
    };
    const cancel = () =>
      h(
        "button",
        { type: "button", class: "secondary", onclick: () => editor.replaceChildren() },
        t("moderation.cancel"),
      );
    const edit = () => {
      const id = `edit-${sug.id}`;
      const input = h("input", { id, type: "text", maxlength: 200, value: sug.label });
      open(
        h("label", { for: id }, t("moderation.new_wording", { label: sug.label })),
        input,
        h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              class: "save",
              onclick: async () => {
                err.replaceChildren();
                try {
                  const updated = await api("PATCH", base, { label: input.value.trim() });
                  announce(t("moderation.reworded", { label: updated.label }));
                  node.replaceWith(card(updated));
                } catch (e) {
                  showError(err, e);
                }
              },
            },
            t("moderation.save"),
          ),
          cancel(),
        ),
      );
    };
    const reject = () => {
      const id = `reason-${sug.id}`;
      const input = h("input", { id, type: "text", maxlength: 500, required: true });
      open(
        h("label", { for: id }, t("moderation.why_reject", { label: sug.label })),
        input,
        h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              class: "danger confirm-reject",
              onclick: () => {
                const reason = input.value.trim();
                if (!reason) {
                  showError(err, new Error(t("moderation.need_reason")));
                  input.focus();
                  return;
                }
                decide(
                  t("moderation.rejected", { label: sug.label }),
                  ["POST", `${base}/reject`],
                  { reason },
                  node,
                );
              },
            },
            t("moderation.reject_suggestion"),
          ),
          cancel(),
        ),
      );
    };
    const merge = () => {
      const id = `merge-${sug.id}`;
      // The select starts on the most similar item the card flags that can take the merge
      // (not hidden); without one, on no item: the moderator chooses (never a default that
      // looks like a suggestion).
      const targets = items.filter((it) => !["hidden", "archived"].includes(it.status ?? "live"));
      const best = (sug.similar || [])
        .filter((x) => x.item_id)
        .map((x) => x.item_id)
        .find((itemId) => targets.some((it) => it.id === itemId));
      const select = h(
        "select",
        { id },
        h("option", { value: "", disabled: true, selected: !best }, t("moderation.choose")),
        targets.map((it) => h("option", { value: it.id, selected: it.id === best }, it.label)),
      );
      open(
        h("label", { for: id }, t("moderation.merge_into", { label: sug.label })),
        select,
        h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              class: "confirm-merge",
              onclick: () => {
                if (!select.value) {
                  showError(err, new Error(t("moderation.need_target")));
                  select.focus();
                  return;
                }
                decide(
                  t("moderation.merged", { label: sug.label }),
                  ["POST", `${base}/merge`],
                  { item_id: select.value },
                  node,
                );
              },
            },
            t("moderation.merge"),
          ),
          cancel(),
        ),
      );
    };
    node.append(
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          {
            type: "button",
            class: "approve",
            onclick: () =>
              decide(t("moderation.approved", { label: sug.label }), ["POST", `${base}/approve`], {}, node),
          },
          t("moderation.approve"),
        ),
        h("button", { type: "button", class: "secondary edit", onclick: edit }, t("moderation.edit")),
        h("button", { type: "button", class: "secondary reject", onclick: reject }, t("moderation.reject")),
        h("button", { type: "button", class: "secondary merge", onclick: merge }, t("moderation.merge_menu")),
      ),
      editor,
      err,
    );
    return node;
  }

  function reviewContent(after) {
    // With moderation "after", suggested items went live unseen: they are listed too.
    const shown = items.filter(
      (it) => (it.status && it.status !== "live") || it.flags > 0 || (after && it.source === "suggested"),
    );
    if (!shown.length)
      return [h("p", { class: "hint" }, t(after ? "moderation.none_after" : "moderation.none"))];
    const setStatus = (it, status) => async (ev) => {
      ev.target.disabled = true;
      try {
        await api("PATCH", `/v1/surveys/${s.id}/items/${encodeURIComponent(it.id)}`, { status });
        announce(t(`moderation.set.${status}`, { label: it.label }));
        await load();
        await onChange();
      } catch (e) {
        ev.target.disabled = false;
        showError(review.querySelector("#review-error"), e);
      }
    };
    return [
      h(
        "div",
        { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("moderation.review_label") },
        h(
          "table",
          { id: "review-table" },
          h("caption", {}, t(after ? "moderation.review_caption_after" : "moderation.review_caption")),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["item", "source", "status", "reports", null].map((c) =>
                h(
                  "th",
                  { scope: "col", class: c === "reports" ? "num" : null },
                  c ? t(`moderation.col.${c}`) : "",
                ),
              ),
            ),
          ),
          h(
            "tbody",
            {},
            shown.map((it) =>
              h(
                "tr",
                { "data-item": it.id },
                h("th", { scope: "row" }, it.label),
                h("td", {}, it.source ? sourceText(it.source) : "–"),
                h("td", {}, h("span", { class: `badge ${it.status}` }, statusText(it.status))),
                h("td", { class: "num" }, num(it.flags ?? 0)),
                h(
                  "td",
                  {},
                  moderates()
                    ? h(
                        "div",
                        { class: "actions tight" },
                        it.status !== "live"
                          ? h(
                              "button",
                              { type: "button", class: "restore", onclick: setStatus(it, "live") },
                              t("moderation.restore"),
                            )
                          : null,
                        it.status !== "hidden"
                          ? h(
                              "button",
                              { type: "button", class: "secondary hide", onclick: setStatus(it, "hidden") },
                              t("moderation.hide"),
                            )
                          : null,
                        it.status !== "archived"
                          ? h(
                              "button",
                              {
                                type: "button",
                                class: "secondary archive",
                                onclick: setStatus(it, "archived"),
                              },
                              t("moderation.archive"),
                            )
                          : null,
                      )
                    : null,
                ),
              ),
            ),
          ),
        ),
      ),
      h("p", { class: "hint" }, t("moderation.review_hint")),
      h("div", { id: "review-error" }),
    ];
  }

  async function load() {
    listError.replaceChildren();
    try {
      const now = await api("GET", `/v1/surveys/${s.id}`);
      items = now.items;
      review.replaceChildren(...reviewContent(now.suggestions?.moderation === "after"));
      if (!now.suggestions?.enabled) {
        count.textContent = t("moderation.off");
        list.replaceChildren();
        return;
      }
      const data = await api("GET", `/v1/surveys/${s.id}/suggestions?status=${filter.value}&limit=100`);
      const counted =
        data.total === 0
          ? t(`moderation.count.${filter.value}.none`)
          : data.total > data.suggestions.length
            ? tn(`moderation.count.${filter.value}.showing`, data.total, { shown: data.suggestions.length })
            : tn(`moderation.count.${filter.value}`, data.total);
      const held =
        data.held > 0
          ? tn("moderation.held", data.held, { respondents: data.held_respondents, batch: data.batch })
          : null;
      count.textContent = held ? `${counted} ${held}` : counted;
      list.replaceChildren(...data.suggestions.map(card));
    } catch (e) {
      showError(listError, e);
    }
  }

  filter.addEventListener("change", load);
  const node = section(
    "moderation",
    t("moderation.title"),
    h("p", { class: "hint" }, t("moderation.hint")),
    h("h4", {}, t("moderation.suggestions")),
    h("div", { class: "field" }, h("label", { for: "suggestion-filter" }, t("moderation.show")), filter),
    count,
    list,
    listError,
    h(
      "h4",
      {},
      t(s.suggestions?.moderation === "after" ? "moderation.reported_after" : "moderation.reported"),
    ),
    review,
  );
  return { node, load };
}

/** Every item with its source (seed, added, suggested), status and reports (read-only). */
export function itemsSection(s) {
  return section(
    "items",
    t("items.title"),
    h(
      "div",
      { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("items.title") },
      h(
        "table",
        { id: "items-table" },
        h("caption", { class: "visually-hidden" }, t("items.caption")),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["item", "source", "status", "reports"].map((c) =>
              h("th", { scope: "col", class: c === "reports" ? "num" : null }, t(`moderation.col.${c}`)),
            ),
          ),
        ),
        h(
          "tbody",
          {},
          s.items.map((it) =>
            h(
              "tr",
              { "data-item": it.id },
              h("td", {}, it.label),
              h("td", { class: "source" }, sourceText(it.source ?? "seed")),
              h(
                "td",
                { class: "status" },
                h("span", { class: `badge ${it.status ?? "live"}` }, statusText(it.status ?? "live")),
              ),
              h("td", { class: "num" }, num(it.flags ?? 0)),
            ),
          ),
        ),
      ),
    ),
  );
}
