/**
 * A local pairwise survey's sections: progress and coverage, the ranking with its
 * intervals and top K, the win-probability matrix, and (up to 100 items) the planner.
 */
import { api, showError } from "/static/api.js";
import { errorBarChart, heatmap, hiddenTable } from "/static/charts.js";
import { autoRefresh, bradleyTerryText, chartBox, fmt, h, pct, section, tableWrap } from "/static/dom.js";
import { surveyPlanSection } from "/static/view-plan.js";
import { goalSection } from "/static/view-survey-goal.js";

export async function pairwiseSections(s, body) {
  const kInput = h("input", {
    id: "k",
    type: "number",
    min: 1,
    max: s.items.length,
    step: 1,
    value: Math.min(3, s.items.length),
  });
  const rankingBox = h("div", { id: "ranking-box" });
  const progress = h("div");
  const goal = s.goal ? goalSection(s) : null;
  const load = async () => {
    try {
      const now = await api("GET", `/v1/surveys/${s.id}`);
      if (goal) goal.refresh(now);
      const r = await api("GET", `/v1/surveys/${s.id}/ranking?k=${kInput.value}`);
      rankingBox.replaceChildren(...rankingContent(r, Number(kInput.value)));
      progress.replaceChildren(progressContent(r.diagnostics, now.undecided));
    } catch (err) {
      showError(rankingBox, err);
    }
  };
  kInput.addEventListener("change", load);
  autoRefresh(load, "survey-title");
  body.append(
    ...(goal ? [goal.node] : []),
    section("progress", "Progress", progress, h("div", { id: "coverage-box" })),
    section(
      "ranking",
      "Ranking",
      h("div", { class: "field" }, h("label", { for: "k" }, "Top-K size"), kInput),
      rankingBox,
    ),
    section("pairwise", "Who beats whom", h("div", { id: "pairwise-box" })),
    ...(s.items.length <= 100 ? [surveyPlanSection(s, kInput)] : []),
  );
  await load();
  try {
    const cov = await api("GET", `/v1/surveys/${s.id}/coverage`);
    const labels = cov.items.map((x) => x.label);
    body.querySelector("#coverage-box").replaceChildren(
      h("h4", {}, `Comparisons per pair (${cov.pairs_observed} of ${cov.pairs_total} pairs answered)`),
      chartBox(
        heatmap(cov.counts, labels, {
          title: "Coverage: comparisons per pair",
          desc: "Each cell counts the stored comparisons of the row and column items.",
        }),
      ),
      hiddenTable(
        "Comparisons per pair",
        ["", ...labels],
        cov.counts.map((row, r) => [labels[r], ...row.map((v) => (v === null ? "–" : String(v)))]),
      ),
    );
  } catch (err) {
    showError(body.querySelector("#coverage-box"), err);
  }
  try {
    if (s.items.length <= 30) {
      const pw = await api("GET", `/v1/surveys/${s.id}/pairwise`);
      const box = body.querySelector("#pairwise-box");
      if (!pw.available)
        box.replaceChildren(h("p", { class: "hint" }, `No intervals yet: ${pw.message || pw.reason}`));
      else
        box.replaceChildren(
          h(
            "p",
            { class: "hint" },
            "Cell = estimated probability that the row item is preferred to the column item.",
          ),
          chartBox(
            heatmap(
              pw.probability,
              pw.items.map((x) => x.label),
              {
                title: "Win probabilities",
                desc: "Estimated probability that the row item beats the column item.",
                max: 1,
                format: (v) => v.toFixed(2),
              },
            ),
          ),
          hiddenTable(
            "Estimated probability that the row item is preferred to the column item",
            ["", ...pw.items.map((x) => x.label)],
            pw.probability.map((row, r) => [
              pw.items[r].label,
              ...row.map((v) => (v === null ? "–" : v.toFixed(2))),
            ]),
          ),
        );
    }
  } catch (err) {
    showError(body.querySelector("#pairwise-box"), err);
  }
}

function progressContent(d, undecided) {
  return h(
    "dl",
    { class: "stats" },
    h("div", {}, h("dt", {}, "Respondents"), h("dd", { id: "stat-respondents" }, String(d.respondents))),
    h("div", {}, h("dt", {}, "Comparisons"), h("dd", { id: "stat-comparisons" }, String(d.comparisons))),
    h(
      "div",
      { title: "A count for the survey: nothing is kept about which pair or who" },
      h("dt", {}, "“Can't decide”"),
      h("dd", { id: "stat-undecided" }, String(undecided ?? 0)),
    ),
    h("div", {}, h("dt", {}, "Pairs answered"), h("dd", {}, `${d.pairs_observed} / ${d.pairs_total}`)),
    h("div", {}, h("dt", {}, "Connected"), h("dd", {}, d.connected ? "yes" : `no (${d.n_components} parts)`)),
    h(
      "div",
      {},
      h("dt", {}, "Connectivity (normalized)"),
      h("dd", {}, fmt(d.algebraic_connectivity_normalized)),
    ),
  );
}

function rankingContent(r, k) {
  const certain = new Set(r.top_k_certain || []);
  const rows = r.items.map((it) => ({
    label: it.label,
    value: it.score,
    lo: it.ci ? it.ci[0] : null,
    hi: it.ci ? it.ci[1] : null,
    note: it.rank_ci ? `rank ${it.rank} (${it.rank_ci[0]}–${it.rank_ci[1]})` : `rank ${it.rank}`,
  }));
  const out = [];
  if (r.diagnostics.comparisons === 0) {
    out.push(
      h("p", { class: "hint", id: "no-data" }, "No answers yet: the ranking appears as respondents answer."),
    );
    return out;
  }
  if (!r.uncertainty.available && r.uncertainty.reason !== "not_requested") {
    out.push(
      h(
        "p",
        { class: "notice", id: "no-intervals", role: "status" },
        h("strong", {}, "Not enough data for intervals yet. "),
        r.uncertainty.message || r.uncertainty.reason,
        " The scores below are point estimates only: do not read their order as certain.",
      ),
    );
  } else if (r.uncertainty.available) {
    out.push(h("p", { class: "hint", id: "estimand" }, `Intervals are for ${r.uncertainty.estimand}.`));
  }
  out.push(
    chartBox(
      errorBarChart(rows, {
        title: "Estimated scores with confidence intervals",
        desc: `Items by estimated BTL score θ̂, best first, with ${pct(r.uncertainty.level)} confidence intervals and rank intervals.`,
        axisLabel: `score θ̂ with ${pct(r.uncertainty.level)} intervals`,
      }),
    ),
    h(
      "p",
      { class: "hint", id: "score-meaning" },
      bradleyTerryText("", "a respondent prefers the higher-scored one"),
    ),
  );
  if (r.top_k) {
    out.push(
      h(
        "p",
        { id: "top-k" },
        h("strong", {}, `Top ${k}: `),
        r.items
          .slice(0, k)
          .map((it, n) =>
            h("span", { class: certain.has(it.item_id) ? "certain" : null }, (n ? ", " : "") + it.label),
          ),
        h(
          "span",
          { class: "hint" },
          certain.size
            ? ` — ✓ marks items certainly in the top ${k} at the ${pct(r.uncertainty.level)} level (jointly).`
            : ` — no item is certainly in the top ${k} yet at the ${pct(r.uncertainty.level)} level (jointly).`,
        ),
      ),
    );
  }
  if (r.tied_groups) {
    const byId = Object.fromEntries(r.items.map((it) => [it.item_id, it.label]));
    const groups = r.tied_groups.filter((g) => g.length > 1);
    out.push(
      h(
        "p",
        {},
        h("strong", {}, "Statistically tied: "),
        groups.length
          ? groups.map((g) => `{${g.map((x) => byId[x]).join(", ")}}`).join("; ") +
              " (runs of items no two of which differ significantly; an item can be in several)"
          : "no two items are tied.",
      ),
    );
  }
  const columns = ["Rank", "Item", "Score", "Interval", "Rank interval", `P(top ${k})`];
  out.push(
    tableWrap(
      "Ranking with intervals",
      h(
        "table",
        { id: "ranking-table" },
        h("caption", { class: "visually-hidden" }, "Ranking with intervals"),
        h("thead", {}, h("tr", {}, ...columns.map((t) => h("th", { scope: "col" }, t)))),
        h(
          "tbody",
          {},
          r.items.map((it) =>
            h(
              "tr",
              {},
              h("td", {}, String(it.rank)),
              h("td", {}, it.label),
              h("td", { class: "num" }, fmt(it.score)),
              h("td", { class: "nowrap" }, it.ci ? `${fmt(it.ci[0])} – ${fmt(it.ci[1])}` : "–"),
              h("td", { class: "nowrap" }, it.rank_ci ? `${it.rank_ci[0]}–${it.rank_ci[1]}` : "–"),
              h(
                "td",
                { class: "num" },
                it.p_top_k === null || it.p_top_k === undefined ? "–" : pct(it.p_top_k),
              ),
            ),
          ),
        ),
      ),
    ),
  );
  return out;
}
