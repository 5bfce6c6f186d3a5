/**
 * A ranking survey's federated rounds (README "Federated rounds"): per round its method and
 * status, its sites (key registered, contributed; the sites a round waits for named), what
 * each site declared about privatizing its rankings and the round's privacy statement, and
 * the published consensus with its ties. Admins also open a round — the sites' credentials
 * are shown once, with the command each site runs — and cancel an open one.
 */
import { api, showError } from "/static/api.js";
import { announce, fmtSignificant, h, numberField, section, tableWrap } from "/static/dom.js";
import { session } from "/static/session.js";

const METHODS = [
  ["borda", "Borda FRA (mean position)"],
  ["lehmer", "Lehmer FRA (majority per Lehmer coordinate)"],
];

/** What a site declared with its contribution. */
function declared(site) {
  if (site.privatization === "mallows") return `Mallows, ε = ${fmtSignificant(site.epsilon, 3)}`;
  if (site.privatization === "none") return "not privatized";
  return "not declared yet";
}

/** The sites an open round waits for, in words (null when it waits for none). */
function waitingFor(x) {
  if (x.status !== "open") return null;
  const missing = x.sites.filter((z) => !z.contributed);
  if (!missing.length) return null;
  const keyless = missing.filter((z) => !z.joined).map((z) => z.name);
  return (
    `Waiting for: ${missing.map((z) => z.name).join(", ")}` +
    (keyless.length ? ` (no key registered yet: ${keyless.join(", ")}).` : ".")
  );
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
  const columns = ["Site", "Key registered", "Contributed", "Declared privatization"];
  const wait = waitingFor(x);
  const card = h(
    "article",
    { class: "round", id: `round-${x.id}`, "aria-labelledby": `round-${x.id}-h` },
    h(
      "h4",
      { id: `round-${x.id}-h` },
      `Round ${x.id}: ${x.method === "borda" ? "Borda" : "Lehmer"} FRA, φ = ${x.parameters.phi}, `,
      h("span", { class: `badge ${x.status === "open" ? "open" : "closed"}` }, x.status),
    ),
    tableWrap(
      `Sites of round ${x.id}`,
      h(
        "table",
        { class: "round-sites" },
        h("thead", {}, h("tr", {}, ...columns.map((t) => h("th", { scope: "col" }, t)))),
        h(
          "tbody",
          {},
          x.sites.map((z) =>
            h(
              "tr",
              {},
              h("td", {}, z.name),
              h("td", {}, z.joined ? "yes" : "no"),
              h("td", {}, z.contributed ? "yes" : "no"),
              h("td", {}, declared(z)),
            ),
          ),
        ),
      ),
    ),
    wait ? h("p", { class: "waiting" }, wait) : null,
    h("p", { class: "round-privacy" }, h("strong", {}, "Privacy: "), x.privacy.statement, "."),
  );
  if (x.result) {
    card.append(
      h(
        "p",
        { class: "round-consensus" },
        h("strong", {}, "Consensus (best first): "),
        consensusText(x.result),
      ),
      h("p", { class: "hint" }, `Ties: ${x.result.tie_break}`),
    );
  } else if (x.status === "cancelled") {
    card.append(h("p", { class: "hint" }, "Cancelled: no consensus was published."));
  }
  if (session.role === "admin" && x.status === "open") {
    const out = h("div");
    const cancel = h(
      "button",
      {
        type: "button",
        class: "danger",
        onclick: async () => {
          if (
            !confirm(`Cancel round ${x.id}? The masked messages are deleted and no consensus is published.`)
          )
            return;
          cancel.disabled = true;
          try {
            await api("POST", `/v1/surveys/${s.id}/rounds/${x.id}/cancel`);
            announce(`Round ${x.id} cancelled`);
            await reload();
          } catch (err) {
            cancel.disabled = false;
            showError(out, err);
          }
        },
      },
      "Cancel round",
    );
    card.append(h("div", { class: "actions" }, cancel), out);
  }
  return card;
}

/** A button that copies `text`; where the clipboard is refused it selects `field` instead. */
function copyButton(label, text, field) {
  const button = h(
    "button",
    {
      type: "button",
      class: "secondary",
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text);
          announce(`${label} copied`);
          button.textContent = "Copied";
        } catch {
          field.select();
          announce("Copying was refused: the text is selected, press Ctrl+C (⌘C) to copy it");
        }
      },
    },
    `Copy ${label}`,
  );
  return button;
}

/** The sites' credentials, shown once right after the round opens, with each site's command. */
function credentialsPanel(round, done) {
  const server = location.origin;
  const panel = h(
    "div",
    { id: "round-credentials", role: "region", "aria-labelledby": "round-credentials-h" },
    h("h4", { id: "round-credentials-h" }, `Credentials of round ${round.id}`),
    h(
      "p",
      { class: "error" },
      "Shown only now: the service keeps a hash of each credential, not the credential. Copy each one and " +
        "give it to its site only (it lets the holder contribute as that site).",
    ),
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
        h("h5", {}, `Site ${z.name}`),
        h(
          "div",
          { class: "field" },
          h("label", { for: `site-token-${k}` }, `Credential of ${z.name}`),
          field,
        ),
        h(
          "div",
          { class: "field" },
          h("label", { for: `site-command-${k}` }, `Command for ${z.name}`),
          commandField,
        ),
        h(
          "div",
          { class: "actions" },
          copyButton(`credential of ${z.name}`, z.token, field),
          copyButton(`command for ${z.name}`, command, commandField),
        ),
      ),
    );
  });
  panel.append(
    h(
      "p",
      { class: "hint" },
      "Each site runs the command next to its rankings file (PrefLib .soc/.soi, or CSV with a 'ranking' " +
        "column). --epsilon privatizes each local ranking with the Mallows mechanism (ε-ranking DP) and is " +
        "declared to the round; leave it out to send the rankings as they are. `privrank site status` shows " +
        "the round from the site's side.",
    ),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", id: "credentials-done", onclick: done },
        "I have given every site its credential",
      ),
    ),
  );
  return panel;
}

function openForm(s, reload, credentialsBox) {
  const method = h(
    "select",
    { id: "round-method" },
    ...METHODS.map(([v, t]) => h("option", { value: v }, t)),
  );
  const sites = h("textarea", {
    id: "round-sites",
    rows: 3,
    required: true,
    placeholder: "north\nsouth\neast",
  });
  const lehmer = h(
    "div",
    { id: "lehmer-fields", hidden: true },
    numberField("round-max-rankings", "Most rankings in all the sites together (M)", 1000000, {
      min: 1,
      step: 1,
    }),
    numberField("round-failure", "Allowed failure probability", 0.01, { min: 0.000001, max: 0.5 }),
  );
  method.addEventListener("change", () => {
    lehmer.hidden = method.value !== "lehmer";
  });
  const two = h("input", { type: "checkbox", id: "round-two-sites" });
  const out = h("div", { id: "round-open-error" });
  const form = h(
    "form",
    { id: "round-form" },
    h("div", { class: "field" }, h("label", { for: "round-method" }, "Algorithm"), method),
    h(
      "div",
      { class: "field" },
      h("label", { for: "round-sites" }, "Sites, one per line"),
      sites,
      h(
        "p",
        { class: "hint" },
        "Letters, digits and . _ - (at least three sites; two must be allowed below).",
      ),
    ),
    numberField("round-phi", "Public dispersion φ", 0.6, { min: 0.01, max: 0.95 }),
    lehmer,
    h(
      "div",
      { class: "field" },
      h(
        "label",
        { class: "check" },
        two,
        "Allow two sites (each then learns the other's message from the published aggregate)",
      ),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Open round")),
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
          announce("Credentials hidden");
        }),
      );
      announce(`Round ${round.id} opened: copy each site's credential now`);
      await reload();
      credentialsBox.querySelector("input")?.focus();
    } catch (err) {
      showError(out, err);
    }
  });
  return h(
    "details",
    { class: "settings", id: "open-round" },
    h("summary", {}, "Open a federated round"),
    h(
      "p",
      { class: "hint" },
      "Sites that hold rankings of this survey's items combine them without pooling them: the server sees " +
        "only masked messages and publishes the consensus when every site has contributed.",
    ),
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
          page.rounds.length ? null : h("p", { class: "hint", id: "no-rounds" }, "No federated rounds yet."),
          ...page.rounds.map((x) => roundCard(s, x, load)),
          page.total > page.rounds.length
            ? h("p", { class: "hint" }, `The newest ${page.rounds.length} of ${page.total} rounds.`)
            : null,
        ].filter(Boolean),
      );
    } catch (err) {
      showError(list, err);
    }
  };
  const node = section(
    "rounds",
    "Federated rounds",
    session.role === "admin" && s.status === "open" ? openForm(s, load, credentialsBox) : null,
    credentialsBox,
    list,
  );
  return { node, load };
}
