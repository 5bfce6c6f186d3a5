/**
 * A participatory survey's moderation (admins and moderators): the respondents'
 * suggestions with their near-duplicates — approve (after editing), reject with a
 * reason, merge into an item — and the items reported or hidden, to restore or hide.
 * Also the read-only list of every item with its source, status and reports.
 */
import { api, showError } from "/static/api.js";
import { announce, h, section } from "/static/dom.js";
import { session } from "/static/session.js";

const SOURCES = { seed: "seed", added: "added", suggested: "suggested" };
const STATUS_TEXT = { live: "live", hidden: "hidden", review: "under review", archived: "archived" };

/** A date and time (the service rounds a suggestion's arrival down to the hour). */
const hour = (iso) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });

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
    `“${x.label}” `,
    h("span", { class: "hint" }, x.item_id ? "(item) " : "(suggestion) "),
    h("span", { class: "similarity" }, `${Math.round(100 * x.similarity)}% similar`),
    x.same_text ? h("span", { class: "badge same-text" }, "same text") : null,
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
      h("option", { value: v, selected: v === "pending" }, v === "all" ? "all" : v),
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
        sug.status === "pending" ? null : h("span", { class: `badge ${sug.status}` }, sug.status),
      ),
      h(
        "p",
        { class: "hint" },
        `Received around ${hour(sug.received_at)}`,
        sug.decided_at ? `; decided ${hour(sug.decided_at)}` : "",
        sug.item_id ? `; item “${byId()[sug.item_id] ?? sug.item_id}”` : "",
        sug.reason ? `; reason: ${sug.reason}` : "",
        ".",
      ),
      sug.similar?.length
        ? h(
            "div",
            { class: "similar" },
            h("span", { class: "similar-h" }, "Near-duplicates: "),
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
      h("button", { type: "button", class: "secondary", onclick: () => editor.replaceChildren() }, "Cancel");
    const edit = () => {
      const id = `edit-${sug.id}`;
      const input = h("input", { id, type: "text", maxlength: 200, value: sug.label });
      open(
        h("label", { for: id }, `New wording for “${sug.label}”`),
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
                  announce(`Suggestion reworded: ${updated.label}`);
                  node.replaceWith(card(updated));
                } catch (e) {
                  showError(err, e);
                }
              },
            },
            "Save",
          ),
          cancel(),
        ),
      );
    };
    const reject = () => {
      const id = `reason-${sug.id}`;
      const input = h("input", { id, type: "text", maxlength: 500, required: true });
      open(
        h("label", { for: id }, `Why reject “${sug.label}”?`),
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
                  showError(err, new Error("Give a reason for rejecting."));
                  input.focus();
                  return;
                }
                decide(`Rejected: ${sug.label}`, ["POST", `${base}/reject`], { reason }, node);
              },
            },
            "Reject suggestion",
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
        h("option", { value: "", disabled: true, selected: !best }, "Choose an item"),
        targets.map((it) => h("option", { value: it.id, selected: it.id === best }, it.label)),
      );
      open(
        h("label", { for: id }, `Merge “${sug.label}” into`),
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
                  showError(err, new Error("Choose the item to merge it into."));
                  select.focus();
                  return;
                }
                decide(`Merged: ${sug.label}`, ["POST", `${base}/merge`], { item_id: select.value }, node);
              },
            },
            "Merge",
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
            onclick: () => decide(`Approved: ${sug.label}`, ["POST", `${base}/approve`], {}, node),
          },
          "Approve",
        ),
        h("button", { type: "button", class: "secondary edit", onclick: edit }, "Edit"),
        h("button", { type: "button", class: "secondary reject", onclick: reject }, "Reject"),
        h("button", { type: "button", class: "secondary merge", onclick: merge }, "Merge into…"),
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
      return [h("p", { class: "hint" }, `No item is reported${after ? ", suggested" : ""} or hidden.`)];
    const setStatus = (it, status) => async (ev) => {
      ev.target.disabled = true;
      try {
        await api("PATCH", `/v1/surveys/${s.id}/items/${encodeURIComponent(it.id)}`, { status });
        announce(`${it.label}: ${status === "live" ? "restored" : status}`);
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
        { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Items to review" },
        h(
          "table",
          { id: "review-table" },
          h(
            "caption",
            {},
            after
              ? "Items suggested or reported by respondents, under review or hidden"
              : "Items reported by respondents, under review or hidden",
          ),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Item", "Source", "Status", "Reports", ""].map((t) =>
                h("th", { scope: "col", class: t === "Reports" ? "num" : null }, t),
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
                h("td", {}, SOURCES[it.source] ?? it.source ?? "–"),
                h("td", {}, h("span", { class: `badge ${it.status}` }, STATUS_TEXT[it.status] ?? it.status)),
                h("td", { class: "num" }, String(it.flags ?? 0)),
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
                              "Restore",
                            )
                          : null,
                        it.status !== "hidden"
                          ? h(
                              "button",
                              { type: "button", class: "secondary hide", onclick: setStatus(it, "hidden") },
                              "Hide",
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
                              "Archive",
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
      h(
        "p",
        { class: "hint" },
        "Restore shows the item to respondents again and clears its reports; a hidden item is never shown; " +
          "an archived one is also left out of the rankings and of the survey's item limit (its answers stay).",
      ),
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
        count.textContent = "This survey does not take suggestions.";
        list.replaceChildren();
        return;
      }
      const data = await api("GET", `/v1/surveys/${s.id}/suggestions?status=${filter.value}&limit=100`);
      const what = filter.value === "all" ? "" : `${filter.value} `;
      count.textContent =
        data.total === 0
          ? `No ${what}suggestions.`
          : `${data.total} ${what}${data.total === 1 ? "suggestion" : "suggestions"}` +
            (data.total > data.suggestions.length ? ` (showing ${data.suggestions.length})` : "") +
            "." +
            (data.held > 0
              ? ` ${data.held} more ${data.held === 1 ? "waits" : "wait"} for a batch: ` +
                `${data.held_respondents} of the ${data.batch} respondents whose suggestions are published together.`
              : "");
      list.replaceChildren(...data.suggestions.map(card));
    } catch (e) {
      showError(listError, e);
    }
  }

  filter.addEventListener("change", load);
  const node = section(
    "moderation",
    "Moderation",
    h(
      "p",
      { class: "hint" },
      "Respondents' suggestions and reports are stored without any link to who sent them: each is held " +
        "until enough different respondents have sent one, then published with theirs in random order, " +
        "all with the same time rounded to the hour.",
    ),
    h("h4", {}, "Suggestions"),
    h("div", { class: "field" }, h("label", { for: "suggestion-filter" }, "Show"), filter),
    count,
    list,
    listError,
    h(
      "h4",
      {},
      s.suggestions?.moderation === "after"
        ? "Suggested, reported and hidden items"
        : "Reported and hidden items",
    ),
    review,
  );
  return { node, load };
}

/** Every item with its source (seed, added, suggested), status and reports (read-only). */
export function itemsSection(s) {
  return section(
    "items",
    "Items",
    h(
      "div",
      { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Items" },
      h(
        "table",
        { id: "items-table" },
        h("caption", { class: "visually-hidden" }, "The survey's items with their source and status"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Item", "Source", "Status", "Reports"].map((t) =>
              h("th", { scope: "col", class: t === "Reports" ? "num" : null }, t),
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
              h("td", { class: "source" }, SOURCES[it.source] ?? it.source ?? "seed"),
              h(
                "td",
                { class: "status" },
                h(
                  "span",
                  { class: `badge ${it.status ?? "live"}` },
                  STATUS_TEXT[it.status] ?? it.status ?? "live",
                ),
              ),
              h("td", { class: "num" }, String(it.flags ?? 0)),
            ),
          ),
        ),
      ),
    ),
  );
}
