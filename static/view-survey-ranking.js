/** A ranking survey's sections: the consensus by the chosen method, and its federated rounds. */
import { api, showError } from "/static/api.js";
import { errorBarChart } from "/static/charts.js";
import { autoRefresh, bradleyTerryText, chartBox, h, section } from "/static/dom.js";
import { fixed, num, t } from "/static/i18n.js";
import { reasonText } from "/static/server-words.js";
import { roundsSection } from "/static/view-survey-rounds.js";

/** The consensus methods, each named by its "ranking.method.<method>" message. */
const METHODS = ["borda", "kemeny", "btl", "lehmer"];

/** What the consensus chart's values are, in words, for `method` over `m` items. */
function scoreMeaning(method, m) {
  if (method === "borda") return t("ranking.meaning.borda", { m, max: m - 1, zero: 0 });
  if (method === "btl") return bradleyTerryText(true);
  return t("ranking.meaning.positions", { one: 1 });
}

export async function rankingSurveySections(s, body) {
  const method = h(
    "select",
    { id: "method" },
    ...METHODS.map((v) => h("option", { value: v }, t(`ranking.method.${v}`))),
  );
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
        note: t("ranking.note", { rank: it.rank, position: fixed(it.mean_position) }),
      }));
      // (null children left out: replaceChildren would write them as the text "null")
      box.replaceChildren(
        ...[
          h(
            "dl",
            { class: "stats" },
            h(
              "div",
              {},
              h("dt", {}, t("ranking.stat.rankings")),
              h("dd", { id: "stat-rankings" }, num(d.rankings)),
            ),
            h("div", {}, h("dt", {}, t("ranking.stat.kendall")), h("dd", {}, fixed(d.mean_kendall_distance))),
            h("div", {}, h("dt", {}, t("ranking.stat.eps_min")), h("dd", {}, fixed(d.epsilon_min))),
          ),
          chartBox(
            errorBarChart(rows, {
              title: t("ranking.chart.title", { method: method.value }),
              desc: t("ranking.chart.desc"),
              axisLabel:
                r.items[0].score === null
                  ? t("ranking.chart.axis_position", { one: 1 })
                  : t("ranking.chart.axis_score"),
            }),
          ),
          h("p", { class: "hint", id: "score-meaning" }, scoreMeaning(r.method, r.items.length)),
          h("p", {}, h("strong", {}, t("ranking.order")), " ", r.items.map((it) => it.label).join(" > ")),
          r.uncertainty.available
            ? null
            : h("p", { class: "hint" }, t("ranking.no_intervals", { reason: reasonText(r.uncertainty) })),
        ].filter(Boolean),
      );
    } catch (err) {
      if (err.status === 409)
        box.replaceChildren(h("p", { class: "hint", id: "no-data" }, t("ranking.no_data")));
      else showError(box, err);
    }
  };
  method.addEventListener("change", load);
  autoRefresh(load, "survey-title");
  body.append(
    section(
      "ranking",
      t("ranking.title"),
      h("div", { class: "field" }, h("label", { for: "method" }, t("ranking.method")), method),
      box,
    ),
  );
  await load();
  const rounds = roundsSection(s);
  body.append(rounds.node);
  autoRefresh(rounds.load, "survey-title");
  await rounds.load();
}
