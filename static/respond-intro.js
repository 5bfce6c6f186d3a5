/**
 * The respondent page's introduction: the privacy explained in plain words, the choice of
 * ε within the survey's bounds (local surveys), and registering.
 */
import { announce, h } from "/static/dom.js";
import { percent, sig, t, tn } from "/static/i18n.js";
import { truthProbability } from "/static/privrank.js";
import { nextPair } from "/static/respond-pairs.js";
import { rankingView } from "/static/respond-ranking.js";
import { client, show, state, summaryParagraph, tokenKey } from "/static/respond-state.js";

function explain(eps) {
  const { survey } = state;
  if (survey.kind === "ranking") {
    const m = survey.n_items;
    const swap = 1 / (1 + Math.exp(eps / (m - 1)));
    const text = t("intro.explain.ranking", {
      swap: percent(swap),
      eps: sig(eps),
      eps_all: sig((eps * m) / 2),
    });
    return `${text} ${t(eps / (m - 1) > 3 ? "intro.explain.ranking.weak" : "intro.explain.ranking.strong")}`;
  }
  const truth = percent(truthProbability(eps));
  const text = t("intro.explain.pairwise", { truth, chance: percent(0.5), eps: sig(eps) });
  return `${text} ${t(eps > 3 ? "intro.explain.pairwise.weak" : "intro.explain.pairwise.strong")}`;
}

function epsilonChoices() {
  const { survey } = state;
  const lo = survey.epsilon_min;
  const hi =
    survey.kind === "pairwise" && survey.respondent_budget
      ? Math.min(survey.epsilon_max, survey.respondent_budget)
      : survey.epsilon_max;
  const set = new Set([lo, hi]);
  if (survey.epsilon_default <= hi) set.add(survey.epsilon_default);
  for (const v of [0.25, 0.5, 1, 2, 3, 5]) if (v > lo && v < hi) set.add(v);
  return [...set].sort((a, b) => a - b);
}

/**
 * How many pairs a respondent can answer at `eps`: as many as the cap allows (⌊budget / ε⌋),
 * but never more than the survey has, m(m − 1)/2 (app/privacy/service.py says the same).
 */
function answersAt(eps) {
  const { survey } = state;
  if (survey.kind !== "pairwise" || !survey.respondent_budget) return null;
  const pairs = (survey.n_items * (survey.n_items - 1)) / 2;
  const n = Math.min(Math.floor((survey.respondent_budget + 1e-9) / eps), pairs);
  return tn("intro.budget", n, { budget: sig(survey.respondent_budget) });
}

/** The intro's form: `body` above the Start button; submitting registers (with `options`), then `registered()`. */
function introForm(body, options, registered) {
  const form = h(
    "form",
    { id: "intro" },
    ...body,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "start" }, t("intro.start"))),
    h("div", { id: "intro-error" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    form.querySelector("#start").disabled = true;
    try {
      await client.register(options());
      sessionStorage.setItem(tokenKey, client.token);
      registered();
    } catch (err) {
      form.querySelector("#start").disabled = false;
      form
        .querySelector("#intro-error")
        .replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
    }
  });
  return form;
}

function centralIntro() {
  const { survey } = state;
  const form = introForm(
    [
      h("h2", {}, t("intro.central.title")),
      h("p", {}, t("intro.central.text", { max: survey.max_comparisons_per_respondent })),
      h(
        "div",
        { class: "privacy-box" },
        h("h3", {}, t("intro.privacy")),
        h("p", { id: "epsilon-meaning" }, t("intro.central.privacy")),
        summaryParagraph(),
      ),
    ],
    () => undefined,
    () => nextPair(),
  );
  show(form);
  form.querySelector("#start").focus();
}

export function intro() {
  const { survey } = state;
  if (survey.privacy_model === "central") return centralIntro();
  const choices = epsilonChoices();
  const initial = choices.includes(survey.epsilon_default) ? survey.epsilon_default : choices[0];
  const label = (v) =>
    survey.kind === "ranking"
      ? t("intro.option.ranking", { eps: sig(v) })
      : t("intro.option.pairwise", { eps: sig(v), truth: percent(truthProbability(v)) });
  const select = h(
    "select",
    { id: "epsilon", "aria-describedby": "epsilon-meaning epsilon-budget" },
    choices.map((v) => h("option", { value: v, selected: v === initial }, label(v))),
  );
  const meaning = h("p", { id: "epsilon-meaning", "aria-live": "polite" }, explain(initial));
  const budget = h(
    "p",
    { id: "epsilon-budget", class: "hint", "aria-live": "polite" },
    answersAt(initial) || "",
  );
  select.addEventListener("change", () => {
    meaning.textContent = explain(Number(select.value));
    budget.textContent = answersAt(Number(select.value)) || "";
  });
  const form = introForm(
    [
      h("h2", {}, t(survey.kind === "ranking" ? "intro.ranking.title" : "intro.pairwise.title")),
      h(
        "p",
        {},
        survey.kind === "ranking" ? t("intro.ranking.text", { n: survey.n_items }) : t("intro.pairwise.text"),
      ),
      h(
        "div",
        { class: "privacy-box" },
        h("h3", {}, t("intro.privacy")),
        meaning,
        budget,
        h("h4", {}, t("summary.title")),
        summaryParagraph(),
      ),
      h("div", { class: "field" }, h("label", { for: "epsilon" }, t("intro.level")), select),
    ],
    () => ({ epsilon: Number(select.value) }),
    () => {
      announce(t("intro.registered"));
      if (survey.kind === "ranking") rankingView();
      else nextPair();
    },
  );
  show(form);
  select.focus();
}
