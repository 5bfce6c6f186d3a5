/** How the respondent page ends: thanks with the privacy spent, the survey having closed, or a failure to retry. */
import { fmtSignificant, h } from "/static/dom.js";
import { PrivrankError } from "/static/privrank.js";
import { central, client, main, show, state } from "/static/respond-state.js";

export async function thanks() {
  const { survey } = state;
  let me = null;
  try {
    me = await client.me();
  } catch {
    /* the summary is optional */
  }
  const pairs = (n) => `${n} ${n === 1 ? "pair" : "pairs"}`;
  show(
    h("h2", { id: "thanks" }, "Thank you!"),
    me
      ? h(
          "p",
          { id: "spent" },
          survey.kind === "ranking"
            ? `Your ranking was sent randomized. Privacy spent: ε = ${fmtSignificant(me.epsilon_total)} for moving one item, ` +
                `ε = ${fmtSignificant((me.epsilon_total * survey.n_items) / 2)} between any two rankings.`
            : central()
              ? `You answered ${pairs(me.comparisons)}.`
              : `You answered ${pairs(me.comparisons)}. Your total privacy spent is ε = ${fmtSignificant(me.epsilon_total)} (the sum over your answers).`,
        )
      : null,
    h(
      "p",
      { class: "hint" },
      central()
        ? "Only differentially private summaries of the answers are ever published."
        : "Every answer was randomized on this device before it was sent.",
    ),
  );
  main.querySelector("#thanks").setAttribute("tabindex", "-1");
  main.querySelector("#thanks").focus();
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
