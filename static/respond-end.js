/**
 * How the respondent page ends: thanks with the privacy spent (and the current results
 * when the survey shows them at the end), the survey having closed, or a failure to retry.
 */
import { h } from "/static/dom.js";
import { percent, sig, t, tn, upTo } from "/static/i18n.js";
import { PrivrankError, truthProbability } from "/static/privrank.js";
import { summaryParagraph } from "/static/respond-intro.js";
import { central, client, main, show, state } from "/static/respond-state.js";
import { resultsContent } from "/static/results-view.js";

/**
 * What a local survey's answers reveal, in plain words with ε. Pairwise: randomized
 * response, ε-local differential privacy per answer; the ε of the answers add up (basic
 * composition), and answers at a total ε reveal at most as much as one answer reported as
 * given with probability e^ε/(1+e^ε). Ranking: the Mallows copy is ε-DP between rankings
 * that differ by moving one item (b = ε/(m−1) per pair), εm/2 between any two; at ε an
 * observer choosing between two such rankings is right at most e^ε/(1+e^ε) of the time.
 * The words are the "respond" catalog's (end.*), the same claims in every language.
 */
function spentText(me) {
  const { survey } = state;
  const total = me.epsilon_total;
  if (survey.kind === "ranking") {
    if (me.ranked === false || !total) return t("end.ranking.none");
    const m = survey.n_items;
    const eps = total;
    return t("end.ranking.spent", {
      swap: percent(1 / (1 + Math.exp(eps / (m - 1)))),
      truth: percent(truthProbability(eps)),
      chance: percent(0.5),
      truth_all: percent(truthProbability((eps * m) / 2)),
      eps: sig(eps),
      eps_all: sig((eps * m) / 2),
    });
  }
  const n = me.comparisons;
  if (!n) return t("end.pairs.none");
  const eps = me.epsilon ?? total / n;
  const truth = percent(truthProbability(eps));
  if (n === 1) return t("end.spent.one", { truth, eps: sig(eps) });
  return t("end.spent.many", {
    n,
    truth,
    eps: sig(eps),
    truth_total: percent(truthProbability(total)),
    total: sig(total),
  });
}

/**
 * The privacy receipt (GET …/respondents/me, `receipt`): each stored answer — the pair, or
 * "your ranking" — with where it was randomized, its mechanism, its ε and the guess bound
 * e^ε/(1+e^ε); then the total under composition, what remains, and what the total means.
 * It names only what the respondent knows (never the stored, randomized answer).
 */
function receiptSection(r) {
  if (!r?.answers_total) return null;
  const cell = (text) => h("td", {}, text);
  const rows = r.answers.map((a) => {
    const what =
      a.kind === "ranking"
        ? t("receipt.ranking", { n: a.n_items })
        : t("receipt.pair", { a: a.labels[0], b: a.labels[1] });
    const mechanism = t(`receipt.mechanism.${a.mechanism}`, {
      flip: percent(a.flip_probability ?? 0),
      swap: percent(a.swap_probability ?? 0),
    });
    const guess =
      a.guess_bound === null
        ? "–"
        : a.kind === "ranking"
          ? t("receipt.guess.ranking", {
              guess: upTo(a.guess_bound),
              guess_whole: upTo(a.guess_bound_whole_ranking),
            })
          : t("receipt.guess", { guess: upTo(a.guess_bound) });
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, what),
      cell(t(`receipt.on.${a.randomized_on}`)),
      cell(mechanism),
      cell(a.epsilon === null ? "–" : sig(a.epsilon, 3)),
      cell(guess),
    );
  });
  const cols = ["answer", "randomized", "mechanism", "epsilon", "guess"];
  const table = h(
    "table",
    { id: "receipt-table" },
    h("caption", {}, t("receipt.caption")),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        cols.map((c) => h("th", { scope: "col" }, t(`receipt.col.${c}`))),
      ),
    ),
    h("tbody", {}, rows),
  );
  const chance = percent(0.5);
  const totals =
    r.model === "central"
      ? [
          h(
            "p",
            { id: "receipt-total" },
            t("receipt.central", {
              spent: sig(r.release_epsilon_spent, 3),
              total: sig(r.release_budget, 3),
              guess: upTo(r.guess_bound_total),
              chance,
            }),
          ),
        ]
      : [
          h(
            "p",
            { id: "receipt-total" },
            tn("receipt.total", r.answers_total, {
              total: sig(r.epsilon_total, 3),
              guess: upTo(r.guess_bound_total),
              chance,
            }),
          ),
          h(
            "p",
            { id: "receipt-remaining" },
            r.respondent_budget === null
              ? t("receipt.no_cap")
              : t("receipt.remaining", {
                  budget: sig(r.respondent_budget, 3),
                  remaining: sig(r.budget_remaining, 3),
                }),
          ),
        ];
  return h(
    "section",
    { id: "receipt", "aria-labelledby": "receipt-h" },
    h("h3", { id: "receipt-h" }, t("receipt.title")),
    h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-labelledby": "receipt-h" }, table),
    r.answers.length < r.answers_total
      ? h("p", { class: "hint" }, t("receipt.more", { shown: r.answers.length, n: r.answers_total }))
      : null,
    ...totals,
    summaryParagraph(),
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
  // A notice the last answer left (a report's thanks) stays in sight on this screen too.
  const notice = state.notice;
  state.notice = null;
  show(
    notice ? h("p", { class: "ok", id: "notice" }, notice) : null,
    h("h2", { id: "thanks" }, t("end.thanks")),
    me ? h("p", { id: "spent" }, central() ? tn("end.answered", me.comparisons) : spentText(me)) : null,
    central()
      ? h("p", { class: "hint" }, t("end.central.hint"))
      : me
        ? null // the summary says how the answers were randomized
        : h("p", { class: "hint" }, t("end.local.hint")),
    me ? receiptSection(me.receipt) : null,
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
      h("h3", { id: "finish-results-h" }, t("end.results.title")),
      ...resultsContent(r, { level: 4, idPrefix: "finish-results" }),
      h(
        "p",
        {},
        h("a", { href: link, id: "results-link" }, t("end.results.link")),
        ` ${t("end.results.updates")}`,
      ),
    ),
  );
}

export function failure(err) {
  if (err instanceof PrivrankError && err.status === 409 && /closed/.test(err.message)) {
    show(h("h2", { id: "closed", tabindex: "-1" }, t("end.closed.title")), h("p", {}, t("end.closed.text")));
    main.querySelector("#closed").focus();
    return;
  }
  // "Try again" resends the same randomized report (privrank.js remembers it): a retry
  // never draws a new randomization of the same true answer.
  show(
    h("p", { class: "error", role: "alert", id: "failure" }, t("end.failure", { error: err.message })),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", id: "try-again", onclick: () => state.start() }, t("end.try_again")),
    ),
  );
  main.querySelector("#try-again").focus();
}
