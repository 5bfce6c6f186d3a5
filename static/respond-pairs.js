/** The respondent page's pairs: one pair at a time, each answer randomized on this device (local surveys). */
import { announce, h } from "/static/dom.js";
import { percent, t } from "/static/i18n.js";
import { truthProbability } from "/static/privrank.js";
import { failure, thanks } from "/static/respond-end.js";
import { participates, reportRow, suggestBox } from "/static/respond-participate.js";
import { central, client, main, params, show, state } from "/static/respond-state.js";

function progressBar() {
  const { target } = state;
  const done = Math.min(state.answered, target);
  const bar = h("div", {
    class: "progress",
    role: "progressbar",
    "aria-valuemin": 0,
    "aria-valuemax": target,
    "aria-valuenow": done,
    "aria-label": t("pairs.progress"),
  });
  const fill = h("span");
  fill.style.width = `${(100 * done) / Math.max(1, target)}%`;
  bar.append(fill);
  return h(
    "div",
    {},
    h(
      "p",
      { class: "hint", id: "progress-text" },
      t("pairs.progress_text", { k: Math.min(done + 1, target), n: target }),
    ),
    bar,
  );
}

export async function nextPair() {
  const { survey, skipped } = state;
  const asked = Number(params.get("n"));
  state.target =
    Number.isInteger(asked) && asked > 0 ? asked : Math.min(10, (survey.n_items * (survey.n_items - 1)) / 2);
  if (central()) state.target = Math.min(state.target, survey.max_comparisons_per_respondent);
  else if (survey.respondent_budget)
    state.target = Math.min(state.target, Math.floor((survey.respondent_budget + 1e-9) / client.epsilon));
  if (state.answered >= state.target) return thanks();
  let pairs;
  try {
    pairs = await client.pairs(Math.min(100, skipped.size + 1));
  } catch (err) {
    return failure(err);
  }
  const pair = pairs.find((p) => !skipped.has(`${p.a}|${p.b}`) && !skipped.has(`${p.b}|${p.a}`));
  if (!pair) return thanks();
  const choose = (winner) => async () => {
    // The pair's buttons; the suggestion box stays usable (it lives on under the next pair).
    for (const b of main.querySelectorAll("button")) if (!b.closest("#suggest-box")) b.disabled = true;
    try {
      await client.answer([{ a: pair.a, b: pair.b, winner, ticket: pair.ticket }], { central: central() });
      state.answered += 1;
      announce(t(central() ? "pairs.sent.central" : "pairs.sent.local", { k: state.answered }));
      await nextPair();
    } catch (err) {
      failure(err);
    }
  };
  const skip = async () => {
    skipped.add(`${pair.a}|${pair.b}`); // not shown again on this page
    // Only the survey's count of "can't decide" learns of it (not which pair); a failure
    // to count it does not stop the respondent.
    await client.undecided(pair.undecided_ticket).catch(() => {});
    announce(t("pairs.skipped"));
    nextPair();
  };
  const notice = state.notice;
  state.notice = null;
  show(
    notice ? h("p", { class: "ok", id: "notice" }, notice) : null,
    progressBar(),
    h("h2", { id: "question" }, t("pairs.question")),
    h(
      "div",
      { class: "pair", role: "group", "aria-labelledby": "question", "data-serial": ++state.serial },
      h("button", { type: "button", id: "choice-a", onclick: choose(pair.a) }, pair.a_label),
      h("button", { type: "button", id: "choice-b", onclick: choose(pair.b) }, pair.b_label),
    ),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", class: "secondary", id: "skip", onclick: skip }, t("pairs.skip")),
      h(
        "button",
        { type: "button", class: "secondary", id: "finish", onclick: () => thanks() },
        t("pairs.finish"),
      ),
    ),
    central()
      ? h("p", { class: "hint" }, t("pairs.hint.central"))
      : h(
          "p",
          { class: "hint" },
          t("pairs.hint.local", { truth: percent(truthProbability(client.epsilon)) }),
        ),
    participates() ? reportRow(pair, nextPair) : null,
    participates() ? suggestBox() : null,
  );
  main.querySelector("#choice-a").focus();
}
