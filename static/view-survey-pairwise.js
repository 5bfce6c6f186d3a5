/**
 * A local pairwise survey's sections: progress and coverage, the ranking with its
 * intervals and top K, the win-probability matrix, and (up to 100 items) the planner.
 */
import { api, showError } from "/static/api.js";
import { errorBarChart, heatmap, hiddenTable } from "/static/charts.js";
import { autoRefresh, bradleyTerryText, chartBox, h, section, tableWrap } from "/static/dom.js";
import { fixed, num, percent, t } from "/static/i18n.js";
import { estimandText, reasonText } from "/static/server-words.js";
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
    section("progress", t("pairwise.progress"), progress, h("div", { id: "coverage-box" })),
    section(
      "ranking",
      t("pairwise.ranking"),
      h("div", { class: "field" }, h("label", { for: "k" }, t("pairwise.k")), kInput),
      rankingBox,
    ),
    section("pairwise", t("pairwise.who_beats"), h("div", { id: "pairwise-box" })),
    ...(s.items.length <= 100 ? [surveyPlanSection(s, kInput)] : []),
  );
  await load();
  try {
    const cov = await api("GET", `/v1/surveys/${s.id}/coverage`);
    const labels = cov.items.map((x) => x.label);
    body.querySelector("#coverage-box").replaceChildren(
      h("h4", {}, t("pairwise.coverage.heading", { observed: cov.pairs_observed, total: cov.pairs_total })),
      chartBox(
        heatmap(cov.counts, labels, {
          title: t("pairwise.coverage.title"),
          desc: t("pairwise.coverage.desc"),
        }),
      ),
      hiddenTable(
        t("pairwise.coverage.table"),
        ["", ...labels],
        cov.counts.map((row, r) => [labels[r], ...row.map((v) => (v === null ? "–" : num(v)))]),
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
        box.replaceChildren(
          h("p", { class: "hint" }, t("pairwise.no_intervals", { reason: reasonText(pw) })),
        );
      else
        box.replaceChildren(
          h("p", { class: "hint" }, t("pairwise.cell")),
          chartBox(
            heatmap(
              pw.probability,
              pw.items.map((x) => x.label),
              {
                title: t("pairwise.win.title"),
                desc: t("pairwise.win.desc"),
                max: 1,
                format: (v) => fixed(v),
              },
            ),
          ),
          hiddenTable(
            t("pairwise.win.table"),
            ["", ...pw.items.map((x) => x.label)],
            pw.probability.map((row, r) => [
              pw.items[r].label,
              ...row.map((v) => (v === null ? "–" : fixed(v))),
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
    h(
      "div",
      {},
      h("dt", {}, t("pairwise.stat.respondents")),
      h("dd", { id: "stat-respondents" }, num(d.respondents)),
    ),
    h(
      "div",
      {},
      h("dt", {}, t("pairwise.stat.comparisons")),
      h("dd", { id: "stat-comparisons" }, num(d.comparisons)),
    ),
    h(
      "div",
      { title: t("pairwise.stat.undecided_title") },
      h("dt", {}, t("pairwise.stat.undecided")),
      h("dd", { id: "stat-undecided" }, num(undecided ?? 0)),
    ),
    h(
      "div",
      {},
      h("dt", {}, t("pairwise.stat.pairs")),
      h("dd", {}, t("pairwise.stat.pairs_value", { observed: d.pairs_observed, total: d.pairs_total })),
    ),
    h(
      "div",
      {},
      h("dt", {}, t("pairwise.stat.connected")),
      h("dd", {}, d.connected ? t("pairwise.yes") : t("pairwise.no_parts", { n: d.n_components })),
    ),
    h(
      "div",
      {},
      h("dt", {}, t("pairwise.stat.connectivity")),
      h("dd", {}, fixed(d.algebraic_connectivity_normalized)),
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
    note: it.rank_ci
      ? t("pairwise.note.range", { rank: it.rank, lo: it.rank_ci[0], hi: it.rank_ci[1] })
      : t("pairwise.note", { rank: it.rank }),
  }));
  const out = [];
  if (r.diagnostics.comparisons === 0) {
    out.push(h("p", { class: "hint", id: "no-data" }, t("pairwise.no_data")));
    return out;
  }
  if (!r.uncertainty.available && r.uncertainty.reason !== "not_requested") {
    out.push(
      h(
        "p",
        { class: "notice", id: "no-intervals", role: "status" },
        h("strong", {}, t("pairwise.not_enough")),
        " ",
        reasonText(r.uncertainty),
        " ",
        t("pairwise.point_estimates"),
      ),
    );
  } else if (r.uncertainty.available) {
    out.push(
      h(
        "p",
        { class: "hint", id: "estimand" },
        t("pairwise.estimand", { estimand: estimandText(r.uncertainty) }),
      ),
    );
  }
  out.push(
    chartBox(
      errorBarChart(rows, {
        title: t("pairwise.chart.title"),
        desc: t("pairwise.chart.desc", { level: percent(r.uncertainty.level) }),
        axisLabel: t("pairwise.chart.axis", { level: percent(r.uncertainty.level) }),
      }),
    ),
    h("p", { class: "hint", id: "score-meaning" }, bradleyTerryText()),
  );
  if (r.top_k) {
    out.push(
      h(
        "p",
        { id: "top-k" },
        h("strong", {}, t("pairwise.top", { k })),
        " ",
        r.items
          .slice(0, k)
          .map((it, n) =>
            h("span", { class: certain.has(it.item_id) ? "certain" : null }, (n ? ", " : "") + it.label),
          ),
        h(
          "span",
          { class: "hint" },
          ` — ${t(certain.size ? "pairwise.top.certain" : "pairwise.top.none", { k, level: percent(r.uncertainty.level) })}`,
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
        h("strong", {}, t("pairwise.tied")),
        " ",
        groups.length
          ? t("pairwise.tied.groups", {
              groups: groups.map((g) => `{${g.map((x) => byId[x]).join(", ")}}`).join("; "),
            })
          : t("pairwise.tied.none"),
      ),
    );
  }
  const columns = [
    t("pairwise.col.rank"),
    t("pairwise.col.item"),
    t("pairwise.col.score"),
    t("pairwise.col.interval"),
    t("pairwise.col.rank_interval"),
    t("pairwise.col.p_top", { k }),
  ];
  out.push(
    tableWrap(
      t("pairwise.table"),
      h(
        "table",
        { id: "ranking-table" },
        h("caption", { class: "visually-hidden" }, t("pairwise.table")),
        h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c)))),
        h(
          "tbody",
          {},
          r.items.map((it) =>
            h(
              "tr",
              {},
              h("td", {}, num(it.rank)),
              h("td", {}, it.label),
              h("td", { class: "num" }, fixed(it.score)),
              h("td", { class: "nowrap" }, it.ci ? `${fixed(it.ci[0])} – ${fixed(it.ci[1])}` : "–"),
              h("td", { class: "nowrap" }, it.rank_ci ? `${it.rank_ci[0]}–${it.rank_ci[1]}` : "–"),
              h(
                "td",
                { class: "num" },
                it.p_top_k === null || it.p_top_k === undefined ? "–" : percent(it.p_top_k),
              ),
            ),
          ),
        ),
      ),
    ),
  );
  return out;
}
