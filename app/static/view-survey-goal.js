/**
 * A goal survey's section on the dashboard: the goal, how close the survey is to it
 * (items settled, answers used), the certified items once met, and the planner's
 * estimate of the answers adaptive assignment saves against balanced assignment.
 */
import { api, showError } from "/static/api.js";
import { h, pct, section } from "/static/dom.js";

function goalText(g) {
  const by = g.certificate === "pairwise" ? " by the pairwise certificate" : "";
  return g.full_ranking
    ? `the whole ranking, certified${by} at the ${pct(g.level)} level`
    : `the top ${g.top_k}, certified${by} at the ${pct(g.level)} level`;
}

function settledBar(g) {
  const bar = h("div", {
    class: "progress",
    role: "progressbar",
    "aria-valuemin": 0,
    "aria-valuemax": g.n_items,
    "aria-valuenow": g.resolved,
    "aria-label": "Items settled",
  });
  const fill = h("span");
  fill.style.width = `${(100 * g.resolved) / Math.max(1, g.n_items)}%`;
  bar.append(fill);
  return bar;
}

/** The goal's standing, from GET /v1/surveys/{id} (the survey `s`). */
export function goalContent(s) {
  const g = s.goal;
  const labels = Object.fromEntries(s.items.map((it) => [it.id, it.label]));
  const state = g.met
    ? `Met${s.status === "closed" && g.close_when_met ? " — the survey closed itself" : ""}`
    : g.unreachable
      ? "Never met: the answers show that preferences cycle, so no such set or order exists"
      : "Not yet met";
  return [
    h(
      "p",
      {},
      h("strong", {}, "Goal: "),
      goalText(g),
      `, with ${s.assignment} assignment. `,
      h("strong", { id: "goal-state" }, state),
      ".",
    ),
    h("p", { class: "hint", id: "goal-estimand" }, g.estimand_text),
    h(
      "p",
      { class: "hint" },
      `${g.resolved} of ${g.n_items} items settled (certainly in or out, or placed):`,
    ),
    settledBar(g),
    h(
      "dl",
      { class: "stats" },
      h(
        "div",
        {},
        h("dt", {}, "Answers since the goal's count began"),
        h("dd", { id: "goal-answers" }, String(g.answers_used)),
      ),
      h(
        "div",
        {},
        h(
          "dt",
          {},
          g.certificate === "pairwise"
            ? "Answers the certificate counted (one per answer, for its pair)"
            : "Item samples the certificate counted",
        ),
        h("dd", {}, String(g.counted_answers)),
      ),
    ),
    g.met
      ? h(
          "p",
          { id: "goal-items" },
          h("strong", {}, g.full_ranking ? "Certified order: " : `Certified top ${g.top_k}: `),
          g.items.map((id) => labels[id] ?? id).join(g.full_ranking ? " > " : ", "),
        )
      : h(
          "p",
          { class: "hint" },
          "Certified means: with probability at least the level, the set (or order) is the population's, even though the survey was checked after every answer and its pairs were chosen from the answers.",
        ),
  ];
}

/** The planner's estimate of the saving, from the survey's current fit. */
async function savingContent(s, box) {
  box.replaceChildren(h("p", { class: "hint" }, "Estimating the answers saved…"));
  try {
    const p = await api("GET", `/v1/surveys/${s.id}/goal/plan?replications=5`);
    const a = p.adaptive;
    const b = p.balanced;
    const fmtN = (x) => Math.round(x).toLocaleString("en");
    box.replaceChildren(
      h(
        "p",
        { id: "goal-saving" },
        h("strong", {}, "Planner's estimate: "),
        p.saving
          ? `adaptive assignment meets this goal in about ${fmtN(a.answers_mean)} answers, balanced in about ${fmtN(b.answers_mean)}: ${p.saving.toFixed(1)}× fewer answers.`
          : `within ${fmtN(p.max_answers)} answers, adaptive met the goal in ${a.met} of ${p.replications} simulated surveys and balanced in ${b.met}.`,
      ),
      h(
        "p",
        { class: "hint" },
        `From ${p.replications} simulated surveys per strategy with the current estimates as the true scores, at ε = ${p.epsilon}; adaptive with this goal's ${p.certificate === "pairwise" ? "pairwise" : "Borda"} certificate, balanced with the Borda certificate.`,
      ),
    );
  } catch (err) {
    showError(box, err);
  }
}

/** The section, and a function that refreshes it from a newly read survey. */
export function goalSection(s) {
  const standing = h("div", { id: "goal-box" }, ...goalContent(s));
  const saving = h("div", { id: "saving-box" });
  const estimate = h(
    "button",
    { type: "button", class: "secondary", id: "estimate-saving", onclick: () => savingContent(s, saving) },
    "Estimate the answers saved",
  );
  return {
    node: section("goal", "Goal", standing, estimate, saving),
    refresh: (fresh) => standing.replaceChildren(...goalContent(fresh)),
  };
}
