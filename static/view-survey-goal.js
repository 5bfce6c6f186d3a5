/**
 * A goal survey's section on the dashboard: the goal, how close the survey is to it
 * (items settled, answers used), the certified items once met, and the planner's
 * estimate of the answers adaptive assignment saves against balanced assignment.
 */
import { api, showError } from "/static/api.js";
import { h, section } from "/static/dom.js";
import { fixed, num, percent, t } from "/static/i18n.js";
import { goalEstimandText } from "/static/server-words.js";

/** The goal in words: "goal.text.<full|top>[_pairwise]", at its level, by its assignment. */
function goalText(g, assignment) {
  const which = `${g.full_ranking ? "full" : "top"}${g.certificate === "pairwise" ? "_pairwise" : ""}`;
  return t(`goal.text.${which}.${assignment === "adaptive" ? "adaptive" : "balanced"}`, {
    k: g.top_k,
    level: percent(g.level),
  });
}

function settledBar(g) {
  const bar = h("div", {
    class: "progress",
    role: "progressbar",
    "aria-valuemin": 0,
    "aria-valuemax": g.n_items,
    "aria-valuenow": g.resolved,
    "aria-label": t("goal.settled_label"),
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
    ? t(s.status === "closed" && g.close_when_met ? "goal.state.met_closed" : "goal.state.met")
    : g.unreachable
      ? t("goal.state.unreachable")
      : t("goal.state.not_yet");
  return [
    h(
      "p",
      {},
      h("strong", {}, t("goal.label")),
      " ",
      goalText(g, s.assignment),
      " ",
      h("strong", { id: "goal-state" }, state),
      ".",
    ),
    h("p", { class: "hint", id: "goal-estimand" }, goalEstimandText(g)),
    h("p", { class: "hint" }, t("goal.settled", { resolved: g.resolved, n: g.n_items })),
    settledBar(g),
    h(
      "dl",
      { class: "stats" },
      h("div", {}, h("dt", {}, t("goal.answers_used")), h("dd", { id: "goal-answers" }, num(g.answers_used))),
      h(
        "div",
        {},
        h("dt", {}, t(g.certificate === "pairwise" ? "goal.counted.pairwise" : "goal.counted.borda")),
        h("dd", {}, num(g.counted_answers)),
      ),
    ),
    g.met
      ? h(
          "p",
          { id: "goal-items" },
          h(
            "strong",
            {},
            g.full_ranking ? t("goal.certified_order") : t("goal.certified_top", { k: g.top_k }),
          ),
          " ",
          g.items.map((id) => labels[id] ?? id).join(g.full_ranking ? " > " : ", "),
        )
      : h("p", { class: "hint" }, t("goal.certified_means")),
  ];
}

/** The planner's estimate of the saving, from the survey's current fit. */
async function savingContent(s, box) {
  box.replaceChildren(h("p", { class: "hint" }, t("goal.estimating")));
  try {
    const p = await api("GET", `/v1/surveys/${s.id}/goal/plan?replications=5`);
    const a = p.adaptive;
    const b = p.balanced;
    const whole = (x) => num(Math.round(x));
    box.replaceChildren(
      h(
        "p",
        { id: "goal-saving" },
        h("strong", {}, t("goal.estimate")),
        " ",
        p.saving
          ? t("goal.saving", {
              adaptive: whole(a.answers_mean),
              balanced: whole(b.answers_mean),
              times: fixed(p.saving, 1),
            })
          : t("goal.no_saving", {
              max: whole(p.max_answers),
              adaptive: a.met,
              balanced: b.met,
              replications: p.replications,
            }),
      ),
      h(
        "p",
        { class: "hint" },
        t(p.certificate === "pairwise" ? "goal.saving_from.pairwise" : "goal.saving_from.borda", {
          replications: p.replications,
          eps: p.epsilon,
        }),
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
    t("goal.estimate_button"),
  );
  return {
    node: section("goal", t("goal.title"), standing, estimate, saving),
    refresh: (fresh) => standing.replaceChildren(...goalContent(fresh)),
  };
}
