/** A ranking survey's sections: the consensus by the chosen method, and its federated rounds. */
import { api, showError } from "/static/api.js";
import { errorBarChart } from "/static/charts.js";
import { autoRefresh, bradleyTerryText, chartBox, fmt, h, section } from "/static/dom.js";
import { roundsSection } from "/static/view-survey-rounds.js";

const METHODS = [
  ["borda", "Borda (mean position)"],
  ["kemeny", "Kemeny (closest in Kendall distance)"],
  ["btl", "BTL on implied pairs"],
  ["lehmer", "Lehmer majority"],
];

const COPIES = "the randomized copies of the respondents' rankings";

/** What the consensus chart's values are, in words, for `method` over `m` items. */
function scoreMeaning(method, m) {
  if (method === "borda")
    return `Scores are Borda points: the mean number of items a ranking puts below the item (${m} items: from 0 to ${m - 1}), over ${COPIES}.`;
  if (method === "btl")
    return `${bradleyTerryText(" of the pairs the rankings imply", "a ranking puts the higher-scored one above the other")} Fitted to ${COPIES}.`;
  return `This method orders the items without scores: the chart shows each item's mean position (1 = first) in ${COPIES}.`;
}

export async function rankingSurveySections(s, body) {
  const method = h("select", { id: "method" }, ...METHODS.map(([v, t]) => h("option", { value: v }, t)));
  const box = h("div", { id: "ranking-box" });
  const load = async () => {
    try {
      const r = await api(
        "GET",
        `/v1/surveys/${s.id}/ranking?method=${method.value}&k=${Math.min(3, s.items.length)}`,
      );
      const d = r.diagnostics;
      const rows = r.items.map((it) => ({
        label: it.label,
        value: it.score ?? it.mean_position,
        lo: it.ci ? it.ci[0] : null,
        hi: it.ci ? it.ci[1] : null,
        note: `rank ${it.rank}, mean position ${fmt(it.mean_position)}`,
      }));
      // (null children left out: replaceChildren would write them as the text "null")
      box.replaceChildren(
        ...[
          h(
            "dl",
            { class: "stats" },
            h("div", {}, h("dt", {}, "Rankings"), h("dd", { id: "stat-rankings" }, String(d.rankings))),
            h(
              "div",
              {},
              h("dt", {}, "Mean Kendall distance to the consensus"),
              h("dd", {}, fmt(d.mean_kendall_distance)),
            ),
            h("div", {}, h("dt", {}, "Smallest ε"), h("dd", {}, fmt(d.epsilon_min))),
          ),
          chartBox(
            errorBarChart(rows, {
              title: `Consensus by ${method.value}`,
              desc: "Items in consensus order with their score (or mean position) and intervals when available.",
              axisLabel: r.items[0].score === null ? "mean position (1 = best)" : "score",
            }),
          ),
          h("p", { class: "hint", id: "score-meaning" }, scoreMeaning(r.method, r.items.length)),
          h("p", {}, h("strong", {}, "Order: "), r.items.map((it) => it.label).join(" > ")),
          r.uncertainty.available
            ? null
            : h("p", { class: "hint" }, `No intervals: ${r.uncertainty.reason}.`),
        ].filter(Boolean),
      );
    } catch (err) {
      if (err.status === 409)
        box.replaceChildren(
          h(
            "p",
            { class: "hint", id: "no-data" },
            "No rankings yet: the consensus appears as respondents answer.",
          ),
        );
      else showError(box, err);
    }
  };
  method.addEventListener("change", load);
  autoRefresh(load, "survey-title");
  body.append(
    section(
      "ranking",
      "Consensus",
      h("div", { class: "field" }, h("label", { for: "method" }, "Method"), method),
      box,
    ),
  );
  await load();
  const rounds = roundsSection(s);
  body.append(rounds.node);
  autoRefresh(rounds.load, "survey-title");
  await rounds.load();
}
