/**
 * A central survey's sections: its respondents and stored comparisons, the privacy budget
 * with its ledger of releases, and a new release. A survey with zCDP accounting shows its
 * budget in (ε, δ) and ρ, and may ask for a release by ρ (docs/mechanisms.md §2.6).
 */
import { api, showError } from "/static/api.js";
import { budgetBar } from "/static/charts.js";
import { bradleyTerryText, h, section, tableWrap } from "/static/dom.js";
import { dateTime, fixed, num, sig, t } from "/static/i18n.js";
import { costText } from "/static/server-words.js";

function ledgerTable(releases, zcdp) {
  const columns = (
    zcdp
      ? ["when", "method", "unit", "eps_delta", "rho", "left_delta", "top"]
      : ["when", "method", "unit", "eps", "cost", "left", "top"]
  ).map((c) => t(`central.col.${c}`));
  return tableWrap(
    t("central.releases"),
    h(
      "table",
      { id: "ledger" },
      h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c)))),
      h(
        "tbody",
        {},
        releases.map((r) =>
          h(
            "tr",
            {},
            h("td", {}, dateTime(r.created_at)),
            h("td", {}, t(`central.method.${r.method}`)),
            h("td", {}, t(`central.unit.${r.unit}`)),
            h("td", { class: "num" }, fixed(r.epsilon)),
            h("td", { class: "num", title: costText(r) }, zcdp ? sig(r.cost_rho, 3) : fixed(r.cost)),
            h("td", { class: "num" }, fixed(r.budget_after)),
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
      h("dd", { id }, value === undefined || value === null ? "–" : num(value)),
    );
  return h(
    "dl",
    { class: "stats", id: "central-counts" },
    stat("stat-respondents", t("central.respondents"), s.respondents),
    stat("stat-comparisons", t("central.comparisons"), s.comparisons),
  );
}

function select(id, options) {
  return h("select", { id }, ...options.map(([value, text]) => h("option", { value }, text)));
}

/** The budget in words: ε (pure), or (ε, δ) with the ρ behind it (zCDP). */
function budgetText(b) {
  const eps = { spent: fixed(b.spent), total: fixed(b.total), remaining: fixed(b.remaining) };
  if (b.accounting !== "zcdp") return t("central.budget.pure", eps);
  return t("central.budget.zcdp", {
    ...eps,
    delta: String(b.delta),
    rho_spent: sig(b.rho_spent, 3),
    rho_total: sig(b.rho_total, 3),
    rho_remaining: sig(b.rho_remaining, 3),
  });
}

/** The release's size: ε for a pure ε-DP release, or (zCDP surveys) ρ for discrete Gaussian counts. */
function sizeFields(zcdp) {
  const eps = h(
    "div",
    { class: "field", id: "rel-eps-field" },
    h("label", { for: "rel-eps" }, t("central.release_eps")),
    h("input", { id: "rel-eps", type: "number", step: "any", min: 0.001, max: 20, value: 0.5 }),
  );
  if (!zcdp) return [eps];
  const by = h(
    "div",
    { class: "field" },
    h("label", { for: "rel-by" }, t("central.noise")),
    select("rel-by", [
      ["rho", t("central.noise.rho")],
      ["epsilon", t("central.noise.epsilon")],
    ]),
  );
  const rho = h(
    "div",
    { class: "field", id: "rel-rho-field" },
    h("label", { for: "rel-rho" }, t("central.release_rho")),
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
          : h("p", { class: "hint" }, t("central.no_releases")),
        ledger.total > ledger.releases.length
          ? h(
              "p",
              { class: "hint" },
              t("central.newest", { shown: ledger.releases.length, total: ledger.total }),
            )
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
      h("label", { for: "rel-method" }, t("central.method")),
      select("rel-method", [
        ["noisy_counts", t("central.method.noisy_counts.long")],
        ["perturbed_mle", t("central.method.perturbed_mle.long")],
      ]),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "rel-unit" }, t("central.unit")),
      select("rel-unit", [
        ["individual", t("central.unit.individual.long")],
        ["edge", t("central.unit.edge.long", { max: maxPerRespondent })],
      ]),
    ),
    ...sizeFields(zcdp),
    h("div", { class: "actions" }, h("button", { type: "submit" }, t("central.make"))),
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
      spend = t("central.spend.rho", {
        rho: sig(unit === "edge" ? rho * maxPerRespondent * maxPerRespondent : rho, 6),
      });
    } else {
      request.epsilon = eps;
      const cost = unit === "edge" ? eps * maxPerRespondent : eps;
      spend = zcdp
        ? t("central.spend.rho_eps", { rho: sig((cost * cost) / 2, 6) })
        : t("central.spend.eps", { eps: sig(cost, 6) });
    }
    if (!confirm(spend)) return;
    try {
      const r = await api("POST", `/v1/surveys/${s.id}/releases`, request);
      const cost = zcdp
        ? t("central.released.zcdp", {
            id: r.id,
            rho: sig(r.cost_rho, 3),
            eps: fixed(r.cost),
            delta: String(r.delta),
          })
        : t("central.released.pure", { id: r.id, eps: fixed(r.cost) });
      latest.replaceChildren(
        ...[
          h("p", {}, cost, " ", costText(r)),
          h(
            "ol",
            {},
            r.result.items.map((it) =>
              h(
                "li",
                {},
                "score" in it
                  ? t("central.item.score", { label: it.label, score: fixed(it.score) })
                  : t("central.item.wins", { label: it.label, wins: it.noisy_wins }),
              ),
            ),
          ),
          r.result.items.some((it) => "score" in it)
            ? h(
                "p",
                { class: "hint", id: "release-score-meaning" },
                `${bradleyTerryText()} ${t("central.score_noise")}`,
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
      t("central.title"),
      countsList(s),
      h("p", { class: "hint" }, t("central.counts_hint")),
      ledgerBox,
    ),
    section("new-release", t("central.new"), h("p", { class: "hint" }, t("central.new_hint")), form, latest),
  );
  await load();
}
