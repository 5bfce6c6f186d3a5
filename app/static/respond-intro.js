/**
 * The respondent page's introduction: the privacy explained in plain words, the choice of
 * ε within the survey's bounds (local surveys), and registering.
 */
import { announce, fmtSignificant, h, pct } from "/static/dom.js";
import { truthProbability } from "/static/privrank.js";
import { nextPair } from "/static/respond-pairs.js";
import { rankingView } from "/static/respond-ranking.js";
import { client, show, state, tokenKey } from "/static/respond-state.js";

function explain(eps) {
  const { survey } = state;
  if (survey.kind === "ranking") {
    const m = survey.n_items;
    const swap = 1 / (1 + Math.exp(eps / (m - 1)));
    return (
      `Before your ranking leaves this device it is replaced by a randomized copy: two items you put next to each ` +
      `other appear swapped with probability ${pct(swap)}, items further apart less often. ` +
      `Privacy level: ε = ${fmtSignificant(eps)} between rankings that differ by moving one item, and ε = ${fmtSignificant((eps * m) / 2)} ` +
      `between any two rankings (smaller ε means more privacy). ` +
      (eps / (m - 1) > 3
        ? "At this level the copy is almost always your true ranking: choose a smaller ε for real protection."
        : "The survey's organizers see only the copy, never your ranking.")
    );
  }
  const truth = truthProbability(eps);
  return (
    `Each answer is randomized on this device before it is sent: it is reported as you gave it with probability ` +
    `${pct(truth)}, and the opposite answer is reported otherwise. Someone who sees a sent answer guesses your real ` +
    `one right ${pct(truth)} of the time, against 50% by chance. (Privacy level ε = ${fmtSignificant(eps)}; smaller ε means ` +
    "more privacy and less precise results.) " +
    (eps > 3
      ? "At this level the sent answer is nearly always your real one: choose a smaller ε for real protection."
      : "Nobody, not even the survey's organizers, can be sure what you really answered.")
  );
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

function answersAt(eps) {
  const { survey } = state;
  if (survey.kind !== "pairwise" || !survey.respondent_budget) return null;
  const n = Math.floor((survey.respondent_budget + 1e-9) / eps);
  return `At this level you can answer up to ${n} ${n === 1 ? "pair" : "pairs"} (your total privacy is the sum over your answers, at most ε = ${fmtSignificant(survey.respondent_budget)}).`;
}

/** The intro's form: `body` above the Start button; submitting registers (with `options`), then `registered()`. */
function introForm(body, options, registered) {
  const form = h(
    "form",
    { id: "intro" },
    ...body,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "start" }, "Start")),
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
      h("h2", {}, "Which matters more?"),
      h(
        "p",
        {},
        `You will see two items at a time (at most ${survey.max_comparisons_per_respondent}) and pick the one that matters more to you.`,
      ),
      h(
        "div",
        { class: "privacy-box" },
        h("h3", {}, "Your privacy"),
        h(
          "p",
          { id: "epsilon-meaning" },
          "Your answers are stored as you give them by the survey's organizer, who never publishes them: results " +
            "leave the service only as differentially private summaries, which reveal almost nothing about any " +
            "single person's answers.",
        ),
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
      ? `ε = ${fmtSignificant(v)}`
      : `ε = ${fmtSignificant(v)} — ${pct(truthProbability(v))} truthful`;
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
      h("h2", {}, survey.kind === "ranking" ? "Rank these items" : "Which matters more?"),
      h(
        "p",
        {},
        survey.kind === "ranking"
          ? `You will put ${survey.n_items} items in order, most important first.`
          : "You will see two items at a time and pick the one that matters more to you. You can skip any pair.",
      ),
      h("div", { class: "privacy-box" }, h("h3", {}, "Your privacy"), meaning, budget),
      h("div", { class: "field" }, h("label", { for: "epsilon" }, "Privacy level"), select),
    ],
    () => ({ epsilon: Number(select.value) }),
    () => {
      announce("Registered");
      if (survey.kind === "ranking") rankingView();
      else nextPair();
    },
  );
  show(form);
  select.focus();
}
