/**
 * A central survey's sections: its respondents and stored comparisons, the privacy budget
 * with its ledger of releases, and a new release. A survey with zCDP accounting shows its
 * budget in (ε, δ) and ρ, and may ask for a release by ρ (docs/mechanisms.md §2.6).
 */
import { api, showError } from "/static/api.js";
import { budgetBar } from "/static/charts.js";
import { bradleyTerryText, fmt, fmtSignificant, h, section, tableWrap } from "/static/dom.js";

function ledgerTable(releases, zcdp) {
  const columns = zcdp
    ? ["When", "Method", "Unit", "ε (at δ)", "ρ charged", "ε left after (at δ)", "Top"]
    : ["When", "Method", "Unit", "ε", "Cost", "Budget left after", "Top"];
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
            h(
              "td",
              { class: "num", title: r.cost_explanation },
              zcdp ? fmtSignificant(r.cost_rho, 3) : fmt(r.cost),
            ),
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

/** The budget in words: ε (pure), or (ε, δ) with the ρ behind it (zCDP). */
function budgetText(b) {
  if (b.accounting !== "zcdp")
    return `Spent ε = ${fmt(b.spent)} of ${fmt(b.total)}; ${fmt(b.remaining)} remains.`;
  return (
    `zCDP accounting: spent (ε, δ) = (${fmt(b.spent)}, ${b.delta}) of ε = ${fmt(b.total)}; ` +
    `${fmt(b.remaining)} remains. ρ spent ${fmtSignificant(b.rho_spent, 3)} of ` +
    `${fmtSignificant(b.rho_total, 3)}; ${fmtSignificant(b.rho_remaining, 3)} remains.`
  );
}

/** The release's size: ε for a pure ε-DP release, or (zCDP surveys) ρ for discrete Gaussian counts. */
function sizeFields(zcdp) {
  const eps = h(
    "div",
    { class: "field", id: "rel-eps-field" },
    h("label", { for: "rel-eps" }, "ε of this release"),
    h("input", { id: "rel-eps", type: "number", step: "any", min: 0.001, max: 20, value: 0.5 }),
  );
  if (!zcdp) return [eps];
  const by = h(
    "div",
    { class: "field" },
    h("label", { for: "rel-by" }, "Noise"),
    select("rel-by", [
      ["rho", "Discrete Gaussian, by ρ (zCDP; noisy counts)"],
      ["epsilon", "Laplace, by ε (pure ε-DP; costs ε²/2)"],
    ]),
  );
  const rho = h(
    "div",
    { class: "field", id: "rel-rho-field" },
    h("label", { for: "rel-rho" }, "ρ of this release"),
    h("input", { id: "rel-rho", type: "number", step: "any", min: 1e-7, max: 200, value: 0.03 }),
  );
  eps.hidden = true;
  return [by, rho, eps];
}

export async function centralSections(s, body) {
  const maxPerRespondent = s.privacy.max_comparisons_per_respondent;
  const zcdp = s.privacy.accounting === "zcdp";
  const ledgerBox = h("div", { id: "ledger-box" });
  const latest = h("div", { id: "release-box" });
  const load = async () => {
    const ledger = await api("GET", `/v1/surveys/${s.id}/releases`);
    const b = ledger.budget;
    // (null children left out: replaceChildren would write them as the text "null")
    ledgerBox.replaceChildren(
      ...[
        h("p", { id: "budget-text" }, budgetText(b)),
        budgetBar(b.spent, b.total),
        ledger.releases.length
          ? ledgerTable(ledger.releases, zcdp)
          : h("p", { class: "hint" }, "No releases yet."),
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
        [
          "edge",
          `One comparison (costs ${maxPerRespondent}·ε: a respondent gives up to ${maxPerRespondent})`,
        ],
      ]),
    ),
    ...sizeFields(zcdp),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Make release")),
  );
  const byRho = () => zcdp && form.querySelector("#rel-by").value === "rho";
  if (zcdp)
    form.querySelector("#rel-by").addEventListener("change", () => {
      form.querySelector("#rel-rho-field").hidden = !byRho();
      form.querySelector("#rel-eps-field").hidden = byRho();
      // ρ buys discrete Gaussian noisy counts; the perturbed MLE is pure ε-DP only.
      const method = form.querySelector("#rel-method");
      if (byRho()) method.value = "noisy_counts";
      method.querySelector('option[value="perturbed_mle"]').disabled = byRho();
    });
  if (zcdp) form.querySelector('#rel-method option[value="perturbed_mle"]').disabled = true;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const eps = Number(form.querySelector("#rel-eps").value);
    const unit = form.querySelector("#rel-unit").value;
    const request = {
      method: form.querySelector("#rel-method").value,
      unit,
      k: Math.min(3, s.items.length),
    };
    let spend;
    if (byRho()) {
      const rho = Number(form.querySelector("#rel-rho").value);
      request.rho = rho;
      spend = `ρ = ${unit === "edge" ? rho * maxPerRespondent * maxPerRespondent : rho} of the survey's zCDP budget`;
    } else {
      request.epsilon = eps;
      const cost = unit === "edge" ? eps * maxPerRespondent : eps;
      spend = zcdp
        ? `ρ = ε²/2 = ${(cost * cost) / 2} of the survey's zCDP budget`
        : `ε = ${cost} of the survey's privacy budget`;
    }
    if (!confirm(`This release spends ${spend}, irreversibly. Go on?`)) return;
    try {
      const r = await api("POST", `/v1/surveys/${s.id}/releases`, request);
      const costText = zcdp
        ? `cost ρ = ${fmtSignificant(r.cost_rho, 3)} (alone (ε, δ) = (${fmt(r.cost)}, ${r.delta}))`
        : `cost ε = ${fmt(r.cost)}`;
      latest.replaceChildren(
        ...[
          h("p", {}, `Release ${r.id}: ${costText}. ${r.cost_explanation}`),
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
