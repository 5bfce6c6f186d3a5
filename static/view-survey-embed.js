/**
 * A survey's "Embed" section on the dashboard: the sites allowed to show the respondent
 * and results pages in a frame (the survey's embed_origins, which become the pages'
 * frame-ancestors; admins edit them, saved through PATCH), and two snippets to paste into
 * such a site, each with a Copy button: an <iframe> of the respondent page, and a
 * privrank.js module script for a frontend of its own.
 */
import { api, showError } from "/static/api.js";
import { announce, h, section } from "/static/dom.js";
import { t } from "/static/i18n.js";

/** The <iframe> a site pastes to show the respondent page. */
export function iframeSnippet(s, base = location.origin) {
  return (
    `<iframe src="${base}/s/${s.id}" title="${escapeAttr(s.title)}" width="100%" height="640" ` +
    `style="border: 0; max-width: 720px" loading="lazy" referrerpolicy="no-referrer"></iframe>`
  );
}

/** A module script using PrivrankClient, for a site that draws its own questions. */
export function moduleSnippet(s, base = location.origin) {
  return [
    '<script type="module">',
    `  import { PrivrankClient } from "${base}/static/privrank.js";`,
    `  const client = new PrivrankClient({ surveyId: "${s.id}", baseUrl: "${base}" });`,
    "  await client.register(); // the survey's default ε; or register({ epsilon })",
    "  const [pair] = await client.pairs(1); // {a, b, a_label, b_label, ticket}",
    "  // Show pair.a_label and pair.b_label; when one is chosen (winner: pair.a or pair.b):",
    "  // await client.answer([{ a: pair.a, b: pair.b, winner, ticket: pair.ticket }]);",
    "</script>",
  ].join("\n");
}

function escapeAttr(text) {
  return String(text).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}

/** A read-only snippet with a button that copies it. */
function snippetBox(id, label, text) {
  const rows = Math.max(4, text.split("\n").length + 1);
  const area = h("textarea", { id, class: "mono", readonly: true, rows, spellcheck: "false" });
  area.value = text;
  const copied = h("span", { class: "hint", id: `${id}-copied`, role: "status" });
  const copy = h(
    "button",
    {
      type: "button",
      class: "secondary",
      id: `${id}-copy`,
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text);
          copied.textContent = t("embed.copied");
        } catch {
          // No clipboard access (e.g. a page not served over HTTPS): select it to copy by hand.
          area.focus();
          area.select();
          copied.textContent = t("embed.selected");
        }
        announce(copied.textContent);
      },
    },
    t("embed.copy"),
  );
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    area,
    h("div", { class: "actions" }, copy, copied),
  );
}

/** The allowed origins: a list for everyone, a form for admins (one origin a line). */
function originsEditor(s, role, onSaved) {
  const origins = s.embed_origins ?? [];
  const current = origins.length
    ? h("ul", { id: "embed-origins" }, ...origins.map((o) => h("li", { class: "mono" }, o)))
    : h("p", { id: "embed-origins", class: "hint" }, t("embed.none"));
  const out = h("div", {}, h("p", {}, t("embed.allowed")), current);
  if (role !== "admin") return out;
  const box = h("textarea", {
    id: "embed-origins-input",
    rows: Math.max(3, origins.length + 1),
    spellcheck: "false",
    placeholder: "https://www.example.org",
    "aria-describedby": "embed-origins-help",
  });
  box.value = origins.join("\n");
  const error = h("div", { id: "embed-error" });
  const save = h("button", { type: "submit", id: "embed-save" }, t("embed.save"));
  const form = h(
    "form",
    {
      id: "embed-form",
      onsubmit: async (event) => {
        event.preventDefault();
        const wanted = box.value
          .split(/[\s,]+/)
          .map((o) => o.trim())
          .filter(Boolean);
        save.disabled = true;
        error.replaceChildren();
        try {
          const fresh = await api("PATCH", `/v1/surveys/${s.id}`, { embed_origins: wanted });
          announce(t("embed.saved", { n: fresh.embed_origins.length }));
          await onSaved(fresh);
        } catch (err) {
          save.disabled = false;
          showError(error, err);
        }
      },
    },
    h(
      "div",
      { class: "field" },
      h("label", { for: "embed-origins-input" }, t("embed.input")),
      box,
      h("p", { class: "hint", id: "embed-origins-help" }, t("embed.help", { max: 20 })),
    ),
    h("div", { class: "actions" }, save),
    error,
  );
  out.append(form);
  return out;
}

/**
 * The section for survey `s` (GET /v1/surveys/{id}); `role` is the signed-in role. A save
 * redraws the section in place. Null from a service without embedding.
 */
export function embedSection(s, role) {
  if (s.embed_origins === undefined) return null;
  const node = section(
    "embed",
    t("embed.title"),
    originsEditor(s, role, async (fresh) => {
      const next = embedSection(fresh, role);
      node.replaceWith(next);
      next.querySelector("#embed-origins-input")?.focus();
    }),
    h("p", { class: "hint" }, t("embed.paste")),
    snippetBox("embed-iframe", t("embed.iframe"), iframeSnippet(s)),
    snippetBox("embed-script", t("embed.script"), moduleSnippet(s)),
  );
  return node;
}
