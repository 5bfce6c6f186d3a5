/**
 * A ranking survey's federated rounds (docs/how-to/federate.md): per round its method and
 * status, its sites (key registered, contributed; the sites a round waits for named), what
 * each site declared about privatizing its rankings and the round's privacy statement, and
 * the published consensus with its ties. Admins also open a round — the sites' credentials
 * are shown once, with the command each site runs — and cancel an open one.
 */
import { api, showError } from "/static/api.js";
import { announce, h, numberField, section, tableWrap } from "/static/dom.js";
import { sig, t } from "/static/i18n.js";
import { roundPrivacyText, tieBreakText } from "/static/server-words.js";
import { session } from "/static/session.js";

/** The round's algorithms, each named by its "rounds.method.<method>" message. */
const METHODS = ["borda", "lehmer"];

/** What a site declared with its contribution. */
function declared(site) {
  if (site.privatization === "mallows") return t("rounds.declared.mallows", { eps: sig(site.epsilon, 3) });
  if (site.privatization === "none") return t("rounds.declared.none");
  return t("rounds.declared.unknown");
}

/** The sites an open round waits for, in words (null when it waits for none). */
function waitingFor(x) {
  if (x.status !== "open") return null;
  const missing = x.sites.filter((z) => !z.contributed);
  if (!missing.length) return null;
  const keyless = missing.filter((z) => !z.joined).map((z) => z.name);
  const sites = missing.map((z) => z.name).join(", ");
  return keyless.length
    ? t("rounds.waiting.keyless", { sites, keyless: keyless.join(", ") })
    : t("rounds.waiting", { sites });
}

/** A published consensus, best first, tied items as one group {A = B}. */
function consensusText(result) {
  const byId = Object.fromEntries(result.items.map((it) => [it.item_id, it]));
  const tiedIn = new Map();
  (result.ties ?? []).forEach((group, k) => {
    for (const id of group) tiedIn.set(id, k);
  });
  const parts = [];
  const shown = new Set();
  for (const it of result.items) {
    const k = tiedIn.get(it.item_id);
    if (k === undefined) parts.push(it.label);
    else if (!shown.has(k)) {
      shown.add(k);
      parts.push(`{${result.ties[k].map((id) => byId[id].label).join(" = ")}}`);
    }
  }
  return parts.join(" > ");
}

function roundCard(s, x, reload) {
  const columns = ["site", "joined", "contributed", "declared"].map((c) => t(`rounds.col.${c}`));
  const wait = waitingFor(x);
  const card = h(
    "article",
    { class: "round", id: `round-${x.id}`, "aria-labelledby": `round-${x.id}-h` },
    h(
      "h4",
      { id: `round-${x.id}-h` },
      t(x.method === "borda" ? "rounds.heading.borda" : "rounds.heading.lehmer", {
        id: x.id,
        phi: x.parameters.phi,
      }),
      " ",
      h(
        "span",
        { class: `badge ${x.status === "open" ? "open" : "closed"}` },
        t(`rounds.status.${x.status}`),
      ),
    ),
    tableWrap(
      t("rounds.sites_of", { id: x.id }),
      h(
        "table",
        { class: "round-sites" },
        h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c)))),
        h(
          "tbody",
          {},
          x.sites.map((z) =>
            h(
              "tr",
              {},
              h("td", {}, z.name),
              h("td", {}, t(z.joined ? "rounds.yes" : "rounds.no")),
              h("td", {}, t(z.contributed ? "rounds.yes" : "rounds.no")),
              h("td", {}, declared(z)),
            ),
          ),
        ),
      ),
    ),
    wait ? h("p", { class: "waiting" }, wait) : null,
    h("p", { class: "round-privacy" }, h("strong", {}, t("rounds.privacy")), " ", roundPrivacyText(x), "."),
  );
  if (x.result) {
    card.append(
      h(
        "p",
        { class: "round-consensus" },
        h("strong", {}, t("rounds.consensus")),
        " ",
        consensusText(x.result),
      ),
      h("p", { class: "hint" }, t("rounds.ties", { tie_break: tieBreakText(x) })),
    );
  } else if (x.status === "cancelled") {
    card.append(h("p", { class: "hint" }, t("rounds.cancelled")));
  }
  if (session.role === "admin" && x.status === "open") {
    const out = h("div");
    const cancel = h(
      "button",
      {
        type: "button",
        class: "danger",
        onclick: async () => {
          if (!confirm(t("rounds.cancel_confirm", { id: x.id }))) return;
          cancel.disabled = true;
          try {
            await api("POST", `/v1/surveys/${s.id}/rounds/${x.id}/cancel`);
            announce(t("rounds.cancelled_one", { id: x.id }));
            await reload();
          } catch (err) {
            cancel.disabled = false;
            showError(out, err);
          }
        },
      },
      t("rounds.cancel"),
    );
    card.append(h("div", { class: "actions" }, cancel), out);
  }
  return card;
}

/**
 * A button named `label` that copies `text` (saying `copied` when done); where the clipboard
 * is refused it selects `field` instead.
 */
function copyButton(label, copied, text, field) {
  const button = h(
    "button",
    {
      type: "button",
      class: "secondary",
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text);
          announce(copied);
          button.textContent = t("rounds.copied");
        } catch {
          field.select();
          announce(t("rounds.copy_refused"));
        }
      },
    },
    label,
  );
  return button;
}

/** The sites' credentials, shown once right after the round opens, with each site's command. */
function credentialsPanel(round, done) {
  const server = location.origin;
  const panel = h(
    "div",
    { id: "round-credentials", role: "region", "aria-labelledby": "round-credentials-h" },
    h("h4", { id: "round-credentials-h" }, t("rounds.credentials", { id: round.id })),
    h("p", { class: "error" }, t("rounds.shown_once")),
  );
  round.sites.forEach((z, k) => {
    const command =
      `PRIVRANK_SITE_TOKEN='${z.token}' privrank site contribute RANKINGS.csv ` +
      `--server ${server} --epsilon 2 --wait 600`;
    const field = h("input", {
      type: "text",
      id: `site-token-${k}`,
      readonly: true,
      class: "mono site-token",
      value: z.token,
    });
    const commandField = h("textarea", {
      id: `site-command-${k}`,
      readonly: true,
      class: "mono site-command",
      rows: 3,
    });
    commandField.value = command;
    panel.append(
      h(
        "div",
        { class: "site-credential", "data-site": z.name },
        h("h5", {}, t("rounds.site", { name: z.name })),
        h(
          "div",
          { class: "field" },
          h("label", { for: `site-token-${k}` }, t("rounds.credential_label", { name: z.name })),
          field,
        ),
        h(
          "div",
          { class: "field" },
          h("label", { for: `site-command-${k}` }, t("rounds.command_label", { name: z.name })),
          commandField,
        ),
        h(
          "div",
          { class: "actions" },
          copyButton(
            t("rounds.copy_credential", { name: z.name }),
            t("rounds.copied_credential", { name: z.name }),
            z.token,
            field,
          ),
          copyButton(
            t("rounds.copy_command", { name: z.name }),
            t("rounds.copied_command", { name: z.name }),
            command,
            commandField,
          ),
        ),
      ),
    );
  });
  panel.append(
    h("p", { class: "hint" }, t("rounds.command_hint")),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", id: "credentials-done", onclick: done }, t("rounds.done")),
    ),
  );
  return panel;
}

function openForm(s, reload, credentialsBox) {
  const method = h(
    "select",
    { id: "round-method" },
    ...METHODS.map((v) => h("option", { value: v }, t(`rounds.method.${v}`))),
  );
  const sites = h("textarea", {
    id: "round-sites",
    rows: 3,
    required: true,
    placeholder: t("rounds.sites_placeholder"),
  });
  const lehmer = h(
    "div",
    { id: "lehmer-fields", hidden: true },
    numberField("round-max-rankings", t("rounds.max_rankings"), 1000000, {
      min: 1,
      step: 1,
    }),
    numberField("round-failure", t("rounds.failure"), 0.01, { min: 0.000001, max: 0.5 }),
  );
  method.addEventListener("change", () => {
    lehmer.hidden = method.value !== "lehmer";
  });
  const two = h("input", { type: "checkbox", id: "round-two-sites" });
  const out = h("div", { id: "round-open-error" });
  const form = h(
    "form",
    { id: "round-form" },
    h("div", { class: "field" }, h("label", { for: "round-method" }, t("rounds.algorithm")), method),
    h(
      "div",
      { class: "field" },
      h("label", { for: "round-sites" }, t("rounds.sites")),
      sites,
      h("p", { class: "hint" }, t("rounds.sites_hint")),
    ),
    numberField("round-phi", t("rounds.phi"), 0.6, { min: 0.01, max: 0.95 }),
    lehmer,
    h("div", { class: "field" }, h("label", { class: "check" }, two, t("rounds.two_sites"))),
    h("div", { class: "actions" }, h("button", { type: "submit" }, t("rounds.open"))),
    out,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = {
      method: method.value,
      sites: sites.value
        .split(/[\n,]/)
        .map((x) => x.trim())
        .filter(Boolean),
      phi: Number(form.querySelector("#round-phi").value),
      allow_two_sites: two.checked,
    };
    if (method.value === "lehmer") {
      body.max_rankings = Number(form.querySelector("#round-max-rankings").value);
      body.failure_probability = Number(form.querySelector("#round-failure").value);
    }
    out.replaceChildren();
    try {
      const round = await api("POST", `/v1/surveys/${s.id}/rounds`, body);
      sites.value = "";
      credentialsBox.replaceChildren(
        credentialsPanel(round, () => {
          credentialsBox.replaceChildren();
          announce(t("rounds.hidden"));
        }),
      );
      announce(t("rounds.opened", { id: round.id }));
      await reload();
      credentialsBox.querySelector("input")?.focus();
    } catch (err) {
      showError(out, err);
    }
  });
  return h(
    "details",
    { class: "settings", id: "open-round" },
    h("summary", {}, t("rounds.open_summary")),
    h("p", { class: "hint" }, t("rounds.open_hint")),
    form,
  );
}

/** The rounds section; `load()` (re)reads the rounds. */
export function roundsSection(s) {
  const list = h("div", { id: "rounds-list" });
  const credentialsBox = h("div", { id: "credentials-box" });
  const load = async () => {
    try {
      const page = await api("GET", `/v1/surveys/${s.id}/rounds`);
      list.replaceChildren(
        ...[
          page.rounds.length ? null : h("p", { class: "hint", id: "no-rounds" }, t("rounds.none")),
          ...page.rounds.map((x) => roundCard(s, x, load)),
          page.total > page.rounds.length
            ? h("p", { class: "hint" }, t("rounds.newest", { shown: page.rounds.length, total: page.total }))
            : null,
        ].filter(Boolean),
      );
    } catch (err) {
      showError(list, err);
    }
  };
  const node = section(
    "rounds",
    t("rounds.title"),
    session.role === "admin" && s.status === "open" ? openForm(s, load, credentialsBox) : null,
    credentialsBox,
    list,
  );
  return { node, load };
}
