/**
 * The keys view (#/keys, admins only): mint analyst, moderator and integration keys —
 * each shown once, with what it may do and how to use it — list every key, and revoke
 * one (POST, GET and DELETE /v1/keys, in the table of endpoints of docs/reference/api.md).
 */
import { api, showError } from "/static/api.js";
import { announce, h, tableWrap } from "/static/dom.js";
import { dateTime, num, t } from "/static/i18n.js";
import { app, forgetKey, session, storedKey } from "/static/session.js";
import { signInView } from "/static/view-signin.js";

/** The roles an admin may mint, in the order the form offers them. */
const ROLES = ["analyst", "moderator", "integration"];

/**
 * The key just minted and who minted it (the signed-in key): drawn again when the Keys
 * view is (another language picked, more rows shown), never once the view is left — the
 * back button does not bring it back — nor for another sign-in.
 */
let minted = null;
window.addEventListener("hashchange", () => {
  if (!location.hash.startsWith("#/keys")) minted = null;
});

/** The new key, shown once: in a read-only field with a copy button, and how to use it. */
function mintedPanel(created) {
  const field = h("input", {
    id: "minted-key",
    type: "text",
    readonly: true,
    value: created.key,
    "aria-describedby": "minted-hint",
    spellcheck: "false",
    autocomplete: "off",
  });
  const copied = h("span", { class: "hint", "aria-live": "polite", id: "minted-copied" });
  const copy = async () => {
    field.select();
    try {
      await navigator.clipboard.writeText(created.key);
      copied.textContent = t("keys.copied");
    } catch {
      // No clipboard (an insecure origin, or permission refused): the key stays selected.
      copied.textContent = t("keys.copy_by_hand");
    }
  };
  return h(
    "div",
    { class: "notice", id: "minted" },
    h("p", {}, h("strong", {}, t("keys.minted", { role: t(`keys.role.${created.role}`) }))),
    h(
      "div",
      { class: "field" },
      h("label", { for: "minted-key" }, t("keys.the_key")),
      h(
        "div",
        { class: "copy-row" },
        field,
        h("button", { type: "button", class: "secondary", onclick: copy }, t("keys.copy")),
        copied,
      ),
    ),
    h("p", { class: "hint", id: "minted-hint" }, t("keys.once")),
    h("p", { class: "hint", id: "minted-use" }, t(`keys.use.${created.role}`)),
  );
}

/** The form that mints a key: a role (with what it may do) and a label. */
function mintForm(onMinted) {
  const roleHint = h(
    "p",
    { class: "hint", id: "key-role-hint", "aria-live": "polite" },
    t("keys.can.analyst"),
  );
  const role = h(
    "select",
    { id: "key-role", "aria-describedby": "key-role-hint" },
    ROLES.map((r) => h("option", { value: r }, t(`keys.role.${r}`))),
  );
  role.addEventListener("change", () => {
    roleHint.textContent = t(`keys.can.${role.value}`);
  });
  const label = h("input", {
    id: "key-label",
    type: "text",
    maxlength: 200,
    "aria-describedby": "key-label-hint",
  });
  const out = h("div", { id: "mint-out" }, minted ? mintedPanel(minted.created) : null);
  const form = h(
    "form",
    { id: "mint-form" },
    h("div", { class: "field" }, h("label", { for: "key-role" }, t("keys.role")), role, roleHint),
    h(
      "div",
      { class: "field" },
      h("label", { for: "key-label" }, t("keys.label")),
      label,
      h("p", { class: "hint", id: "key-label-hint" }, t("keys.label_hint")),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "mint-btn" }, t("keys.mint"))),
    out,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = form.querySelector("#mint-btn");
    button.disabled = true; // one key per click
    try {
      const body = { role: role.value };
      if (label.value.trim()) body.label = label.value.trim();
      const created = await api("POST", "/v1/keys", body);
      minted = { created, by: storedKey() };
      out.replaceChildren(mintedPanel(created));
      label.value = "";
      announce(t("keys.minted", { role: t(`keys.role.${created.role}`) }));
      out.querySelector("#minted-key").focus();
      out.querySelector("#minted-key").select();
    } catch (err) {
      minted = null; // the error takes the panel's place
      showError(out, err);
      return;
    } finally {
      button.disabled = false;
    }
    // The key stays on screen whatever the list's reload answers (onMinted shows its own errors).
    await onMinted();
  });
  return form;
}

/** One key's row: its role, label, dates, and a Revoke button while it is active. */
function keyRow(k, reload, status) {
  // The label as written into a sentence: isolated, so that a right-to-left label (or a
  // direction override in it) cannot reorder the words around it; the id when it is blank.
  const name = `\u2068${k.label?.trim() || k.id}\u2069`;
  // The signed-in key's id is the part of the key before its dot.
  const own = (storedKey() || "").split(".")[0] === k.id;
  const revoke = async () => {
    const question = own ? t("keys.revoke_own_confirm") : t("keys.revoke_confirm", { label: name });
    if (!window.confirm(question)) return;
    try {
      await api("DELETE", `/v1/keys/${encodeURIComponent(k.id)}`);
      if (own) {
        forgetKey();
        session.role = null;
        document.getElementById("nav-new").hidden = true;
        document.getElementById("nav-keys").hidden = true;
        signInView(t("keys.revoked_own"));
        return;
      }
      announce(t("keys.revoked_announce", { label: name }));
      await reload();
    } catch (err) {
      showError(status, err);
    }
  };
  return h(
    "tr",
    { "data-key": k.id },
    h("td", {}, h("code", {}, k.id)),
    h("td", {}, t(`keys.role.${k.role}`)),
    h("td", {}, k.label?.trim() || "–"),
    h("td", {}, dateTime(k.created_at)),
    h(
      "td",
      {},
      k.revoked_at
        ? h("span", { class: "badge closed" }, t("keys.revoked_on", { date: dateTime(k.revoked_at) }))
        : h("span", { class: "badge open" }, t("keys.active")),
    ),
    h(
      "td",
      {},
      k.revoked_at
        ? null
        : h(
            "button",
            {
              type: "button",
              class: "danger",
              onclick: revoke,
              "aria-label": t("keys.revoke_label", { label: name }),
            },
            t("keys.revoke"),
          ),
    ),
  );
}

export async function keysView() {
  if (session.role !== "admin") {
    app.replaceChildren(h("p", { class: "error" }, t("keys.admin_only")));
    return;
  }
  if (minted && minted.by !== storedKey()) minted = null;
  // How many keys to show (#/keys?show=N): a whole number from 1 to 1000, else 100.
  const asked = Math.trunc(Number(new URLSearchParams(location.hash.split("?")[1] || "").get("show")));
  const limit = asked >= 1 ? Math.min(asked, 1000) : 100;
  const listing = h("div", { id: "keys-list" });
  const status = h("div", { id: "keys-status" });
  const load = async () => {
    const data = await api("GET", `/v1/keys?limit=${limit}`);
    const head = ["id", "role", "label", "created", "status", "action"].map((c) =>
      h("th", { scope: "col" }, t(`keys.col.${c}`)),
    );
    const table = h(
      "table",
      { id: "keys-table" },
      h("caption", {}, t("keys.caption")),
      h("thead", {}, h("tr", {}, head)),
      h(
        "tbody",
        {},
        data.keys.map((k) => keyRow(k, load, status)),
      ),
    );
    listing.replaceChildren(tableWrap(t("keys.caption"), table));
    if (data.total > data.keys.length) {
      listing.append(
        h(
          "p",
          { class: "hint" },
          t("keys.showing", { shown: num(data.keys.length), total: num(data.total) }),
          " ",
          h("a", { href: `#/keys?show=${Math.min(limit * 10, 1000)}` }, t("list.show_more")),
        ),
      );
    }
  };
  app.replaceChildren(
    h(
      "section",
      { "aria-labelledby": "keys-h" },
      h("h2", { id: "keys-h" }, t("keys.title")),
      h("p", { class: "hint" }, t("keys.intro")),
      h(
        "div",
        { class: "panel" },
        h("h3", {}, t("keys.mint_title")),
        mintForm(() => load().catch((err) => showError(status, err))),
      ),
      h("div", { class: "panel" }, h("h3", {}, t("keys.list_title")), status, listing),
    ),
  );
  await load();
}
