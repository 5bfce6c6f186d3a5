/**
 * A central survey's sections: its respondents and stored comparisons, the privacy budget
 * with its ledger of releases, and a new release.
 */
import { api, showError } from "/static/api.js";
import { budgetBar } from "/static/charts.js";
import { bradleyTerryText, fmt, h, section, tableWrap } from "/static/dom.js";

function ledgerTable(releases) {
  const columns = ["When", "Method", "Unit", "ε", "Cost", "Budget left after", "Top"];
  return tableWrap(
    "Releases",
    h(
      "table",
      { id: "ledger" },
      h("thead", {}, h("tr", {}, ...columns.map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        releases.map((r) =>
          h(
            "tr",
            {},
            h("td", {}, new Date(r.created_at).toLocaleString()),
            h("td", {}, r.method),
            h("td", {}, r.unit),
            h("td", { class: "num" }, fmt(r.epsilon)),
            h("td", { class: "num", title: r.cost_explanation }, fmt(r.cost)),
            h("td", { class: "num" }, fmt(r.budget_after)),
            h(
              "td",
              {},
              r.top
                .slice(0, 3)
                .map((it) => it.label)
                .join(", "),
            ),
          ),
        ),
      ),
    ),
  );
}

/** The survey's respondents and stored comparisons (true answers, central model). */
function countsList(s) {
  const stat = (id, term, value) =>
    h(
      "div",
      {},
      h("dt", {}, term),
      h("dd", { id }, value === undefined || value === null ? "–" : String(value)),
    );
  return h(
    "dl",
    { class: "stats", id: "central-counts" },
    stat("stat-respondents", "Respondents", s.respondents),
    stat("stat-comparisons", "Comparisons stored", s.comparisons),
  );
}

function select(id, options) {
  return h("select", { id }, ...options.map(([value, text]) => h("option", { value }, text)));
}

export async function centralSections(s, body) {
  const p_L = s.privacy.max_comparisons_per_respondent;
  const ledgerBox = h("div", { id: "ledger-box" });
  const latest = h("div", { id: "release-box" });
  const load = async () => {
    const ledger = await api("GET", `/v1/surveys/${s.id}/releases`);
    const b = ledger.budget;
    // (null children left out: replaceChildren would write them as the text "null")
    ledgerBox.replaceChildren(
      ...[
        h("p", {}, `Spent ε = ${fmt(b.spent)} of ${fmt(b.total)}; ${fmt(b.remaining)} remains.`),
        budgetBar(b.spent, b.total),
        ledger.releases.length ? ledgerTable(ledger.releases) : h("p", { class: "hint" }, "No releases yet."),
        ledger.total > ledger.releases.length
          ? h("p", { class: "hint" }, `The newest ${ledger.releases.length} of ${ledger.total} releases.`)
          : null,
      ].filter(Boolean),
    );
  };
  const form = h(
    "form",
    { id: "release-form" },
    h(
      "div",
      { class: "field" },
      h("label", { for: "rel-method" }, "Method"),
      select("rel-method", [
        ["noisy_counts", "Noisy win counts (best for top-K)"],
        ["perturbed_mle", "Perturbed MLE (scores)"],
      ]),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "rel-unit" }, "What ε protects"),
      select("rel-unit", [
        ["individual", "Everything one respondent answered"],
        ["edge", "One comparison (costs L·ε)"],
      ]),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "rel-eps" }, "ε of this release"),
      h("input", { id: "rel-eps", type: "number", step: "any", min: 0.001, max: 20, value: 0.5 }),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Make release")),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const eps = Number(form.querySelector("#rel-eps").value);
    const unit = form.querySelector("#rel-unit").value;
    const cost = unit === "edge" ? eps * p_L : eps;
    if (!confirm(`This release spends ε = ${cost} of the survey's privacy budget, irreversibly. Go on?`))
      return;
    try {
      const r = await api("POST", `/v1/surveys/${s.id}/releases`, {
        method: form.querySelector("#rel-method").value,
        unit: form.querySelector("#rel-unit").value,
        epsilon: Number(form.querySelector("#rel-eps").value),
        k: Math.min(3, s.items.length),
      });
      latest.replaceChildren(
        ...[
          h("p", {}, `Release ${r.id}: cost ε = ${fmt(r.cost)}. ${r.cost_explanation}`),
          h(
            "ol",
            {},
            r.result.items.map((it) =>
              h(
                "li",
                {},
                `${it.label} (${"score" in it ? `score ${fmt(it.score)}` : `noisy wins ${it.noisy_wins}`})`,
              ),
            ),
          ),
          r.result.items.some((it) => "score" in it)
            ? h(
                "p",
                { class: "hint", id: "release-score-meaning" },
                `${bradleyTerryText("", "a respondent prefers the higher-scored one")} ` +
                  "The scores include the noise that makes the release differentially private.",
              )
            : null,
        ].filter(Boolean),
      );
      await load();
    } catch (err) {
      showError(latest, err);
    }
  });
  body.append(
    section(
      "budget",
      "Privacy budget and releases",
      countsList(s),
      h(
        "p",
        { class: "hint" },
        "Exact counts, for the survey's operators: the answers themselves leave the service only as differentially private releases.",
      ),
      ledgerBox,
    ),
    section(
      "new-release",
      "New release",
      h(
        "p",
        { class: "hint" },
        "True answers never leave the service; a release is differentially private and spends budget.",
      ),
      form,
      latest,
    ),
  );
  await load();
}
