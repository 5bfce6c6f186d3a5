/**
 * How the respondent page ends: thanks with the privacy spent (and the current results
 * when the survey shows them at the end), the survey having closed, or a failure to retry.
 */
import { fmtSignificant, h, pct } from "/static/dom.js";
import { PrivrankError, truthProbability } from "/static/privrank.js";
import { central, client, main, show, state } from "/static/respond-state.js";
import { resultsContent } from "/static/results-view.js";

const pairs = (n) => `${n} ${n === 1 ? "pair" : "pairs"}`;

/**
 * What a local survey's answers reveal, in plain words with ε. Pairwise: randomized
 * response, ε-local differential privacy per answer; the ε of the answers add up (basic
 * composition), and answers at a total ε reveal at most as much as one answer reported as
 * given with probability e^ε/(1+e^ε). Ranking: the Mallows copy is ε-DP between rankings
 * that differ by moving one item (b = ε/(m−1) per pair), εm/2 between any two; at ε an
 * observer choosing between two such rankings is right at most e^ε/(1+e^ε) of the time.
 */
function spentText(me) {
  const { survey } = state;
  const total = me.epsilon_total;
  if (survey.kind === "ranking") {
    if (me.ranked === false || !total) return "No ranking was sent: no privacy was spent (ε = 0).";
    const m = survey.n_items;
    const eps = total;
    return (
      "Your ranking was replaced on this device by a randomized copy, and only the copy was sent: two items you put " +
      `next to each other appear swapped in it with probability ${pct(1 / (1 + Math.exp(eps / (m - 1))))}, items ` +
      "further apart less often. Someone who sees the copy and guesses between your ranking and the same ranking with " +
      `one item moved is right at most ${pct(truthProbability(eps))} of the time, against 50% by chance; between any ` +
      `two rankings, at most ${pct(truthProbability((eps * m) / 2))} (ε = ${fmtSignificant(eps)} for moving one item, ` +
      `ε = ${fmtSignificant((eps * m) / 2)} between any two rankings).`
    );
  }
  const n = me.comparisons;
  if (!n) return "You answered no pairs: nothing was sent and no privacy was spent (ε = 0).";
  const eps = me.epsilon ?? total / n;
  const each =
    `reported as you gave it with probability ${pct(truthProbability(eps))} and the opposite otherwise ` +
    `(ε = ${fmtSignificant(eps)}: ε-local differential privacy`;
  if (n === 1)
    return `You answered 1 pair. Your answer was randomized on this device before it was sent: ${each}).`;
  return (
    `You answered ${pairs(n)}. Each answer was randomized on this device before it was sent: ${each} for each ` +
    `answer). Together your ${n} answers reveal at most as much as one answer reported as you gave it with ` +
    `probability ${pct(truthProbability(total))} would (ε = ${fmtSignificant(total)} in total, the sum over your answers).`
  );
}

export async function thanks() {
  const { survey } = state;
  let me = null;
  try {
    me = await client.me();
  } catch {
    /* the summary is optional */
  }
  show(
    h("h2", { id: "thanks" }, "Thank you!"),
    me ? h("p", { id: "spent" }, central() ? `You answered ${pairs(me.comparisons)}.` : spentText(me)) : null,
    central()
      ? h("p", { class: "hint" }, "Only differentially private summaries of the answers are ever published.")
      : me
        ? null // the summary says how the answers were randomized
        : h("p", { class: "hint" }, "Every answer was randomized on this device before it was sent."),
  );
  main.querySelector("#thanks").setAttribute("tabindex", "-1");
  main.querySelector("#thanks").focus();
  if (survey.results_on_finish) await finishResults();
}

/** The survey's current results under the thanks (surveys with results_on_finish). */
async function finishResults() {
  let r;
  try {
    r = await client.results();
  } catch {
    return; // the results are a bonus: the thanks stand without them
  }
  const link = `/r/${encodeURIComponent(client.surveyId)}`;
  main.append(
    h(
      "section",
      { id: "finish-results", "aria-labelledby": "finish-results-h" },
      h("h3", { id: "finish-results-h" }, "The results so far"),
      ...resultsContent(r, { level: 4, idPrefix: "finish-results" }),
      h(
        "p",
        {},
        h("a", { href: link, id: "results-link" }, "The results page"),
        " (it updates as answers come in).",
      ),
    ),
  );
}

export function failure(err) {
  if (err instanceof PrivrankError && err.status === 409 && /closed/.test(err.message)) {
    show(
      h("h2", { id: "closed", tabindex: "-1" }, "This survey has closed"),
      h("p", {}, "Your earlier answers were received. Thank you!"),
    );
    main.querySelector("#closed").focus();
    return;
  }
  // "Try again" resends the same randomized report (privrank.js remembers it): a retry
  // never draws a new randomization of the same true answer.
  show(
    h("p", { class: "error", role: "alert", id: "failure" }, `Something went wrong: ${err.message}`),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", id: "try-again", onclick: () => state.start() }, "Try again"),
    ),
  );
  main.querySelector("#try-again").focus();
}
