/**
 * The respondent page, /s/{survey_id}: explains the privacy in plain words, lets the
 * respondent choose ε within the survey's bounds, then asks one pair at a time (or
 * a drag-to-order ranking), randomizing every answer on this device before it is
 * sent (privrank.js, privatized: true). Finishes with the total privacy spent.
 */
import { PrivrankClient, PrivrankError, truthProbability } from "/static/privrank.js";

const main = document.getElementById("survey");
const statusRegion = document.getElementById("status");
const surveyId = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
const params = new URLSearchParams(location.search);
const tokenKey = `privrank.respondent.${surveyId}`;
const client = new PrivrankClient({ surveyId, token: sessionStorage.getItem(tokenKey) });
let survey = null;
let answered = 0;
let target = 10;
const skipped = new Set();
let serial = 0; // counts the pairs shown (data-serial, for tests and assistive tech)
const DRAG_TYPE = "application/x-privrank-item";

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

/** A probability as a percentage that never claims certainty: "<1%" and ">99%" at the ends. */
const pct = (x) => (x < 0.01 ? "<1%" : x > 0.99 ? ">99%" : `${(100 * x).toFixed(0)}%`);
/** ε with two significant digits (0.001 stays 0.001). */
const fmt = (x) => String(Number(Number(x).toPrecision(2)));

function say(text) {
  statusRegion.textContent = text;
}

function show(...children) {
  main.replaceChildren(...children);
}

function explain(eps) {
  if (survey.kind === "ranking") {
    const m = survey.n_items;
    const swap = 1 / (1 + Math.exp(eps / (m - 1)));
    return (
      `Before your ranking leaves this device it is replaced by a randomized copy: two items you put next to each ` +
      `other appear swapped with probability ${pct(swap)}, items further apart less often. ` +
      `Privacy level: ε = ${fmt(eps)} between rankings that differ by moving one item, and ε = ${fmt((eps * m) / 2)} ` +
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
    `one right ${pct(truth)} of the time, against 50% by chance. (Privacy level ε = ${fmt(eps)}; smaller ε means ` +
    "more privacy and less precise results.) " +
    (eps > 3
      ? "At this level the sent answer is nearly always your real one: choose a smaller ε for real protection."
      : "Nobody, not even the survey's organizers, can be sure what you really answered.")
  );
}

function epsilonChoices() {
  const lo = survey.epsilon_min;
  const hi = survey.kind === "pairwise" && survey.respondent_budget ? Math.min(survey.epsilon_max, survey.respondent_budget) : survey.epsilon_max;
  const set = new Set([lo, hi]);
  if (survey.epsilon_default <= hi) set.add(survey.epsilon_default);
  for (const v of [0.25, 0.5, 1, 2, 3, 5]) if (v > lo && v < hi) set.add(v);
  return [...set].sort((a, b) => a - b);
}

function answersAt(eps) {
  if (survey.kind !== "pairwise" || !survey.respondent_budget) return null;
  const n = Math.floor((survey.respondent_budget + 1e-9) / eps);
  return `At this level you can answer up to ${n} ${n === 1 ? "pair" : "pairs"} (your total privacy is the sum over your answers, at most ε = ${fmt(survey.respondent_budget)}).`;
}

// -- start ------------------------------------------------------------------------------------

async function start() {
  try {
    survey = await client.survey();
  } catch (err) {
    show(h("p", { class: "error", role: "alert" }, err.status === 404 ? "There is no such survey." : err.message));
    return;
  }
  document.getElementById("survey-name").textContent = survey.title;
  document.title = `${survey.title} — privrank`;
  if (survey.status !== "open") {
    show(h("h2", {}, "This survey is closed"), h("p", {}, "It no longer takes answers. Thank you for your interest."));
    return;
  }
  if (client.token) {
    const me = await client.me().catch(() => null);
    if (me) {
      client.epsilon = me.epsilon;
      answered = me.comparisons;
      return survey.kind === "ranking" ? rankingView() : nextPair();
    }
  }
  intro();
}

function centralIntro() {
  const form = h(
    "form",
    { id: "intro" },
    h("h2", {}, "Which matters more?"),
    h("p", {}, `You will see two items at a time (at most ${survey.max_comparisons_per_respondent}) and pick the one that matters more to you.`),
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
    h("div", { class: "actions" }, h("button", { type: "submit", id: "start" }, "Start")),
    h("div", { id: "intro-error" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    form.querySelector("#start").disabled = true;
    try {
      await client.register();
      sessionStorage.setItem(tokenKey, client.token);
      nextPair();
    } catch (err) {
      form.querySelector("#start").disabled = false;
      form.querySelector("#intro-error").replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
    }
  });
  show(form);
  form.querySelector("#start").focus();
}

function intro() {
  if (survey.privacy_model === "central") return centralIntro();
  const choices = epsilonChoices();
  const initial = choices.includes(survey.epsilon_default) ? survey.epsilon_default : choices[0];
  const label = (v) =>
    survey.kind === "ranking" ? `ε = ${fmt(v)}` : `ε = ${fmt(v)} — ${pct(truthProbability(v))} truthful`;
  const select = h(
    "select",
    { id: "epsilon", "aria-describedby": "epsilon-meaning epsilon-budget" },
    choices.map((v) => h("option", { value: v, selected: v === initial }, label(v))),
  );
  const meaning = h("p", { id: "epsilon-meaning", "aria-live": "polite" }, explain(initial));
  const budget = h("p", { id: "epsilon-budget", class: "hint", "aria-live": "polite" }, answersAt(initial) || "");
  select.addEventListener("change", () => {
    meaning.textContent = explain(Number(select.value));
    budget.textContent = answersAt(Number(select.value)) || "";
  });
  const form = h(
    "form",
    { id: "intro" },
    h("h2", {}, survey.kind === "ranking" ? "Rank these items" : "Which matters more?"),
    h("p", {}, survey.kind === "ranking" ? `You will put ${survey.n_items} items in order, most important first.` : "You will see two items at a time and pick the one that matters more to you. You can skip any pair."),
    h("div", { class: "privacy-box" }, h("h3", {}, "Your privacy"), meaning, budget),
    h("div", { class: "field" }, h("label", { for: "epsilon" }, "Privacy level"), select),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "start" }, "Start")),
    h("div", { id: "intro-error" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    form.querySelector("#start").disabled = true;
    try {
      await client.register({ epsilon: Number(select.value) });
      sessionStorage.setItem(tokenKey, client.token);
      say("Registered");
      if (survey.kind === "ranking") rankingView();
      else nextPair();
    } catch (err) {
      form.querySelector("#start").disabled = false;
      form.querySelector("#intro-error").replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
    }
  });
  show(form);
  select.focus();
}

// -- pairs ---------------------------------------------------------------------------------------

function progressBar() {
  const done = Math.min(answered, target);
  const bar = h("div", { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": target, "aria-valuenow": done, "aria-label": "Progress" });
  const fill = h("span");
  fill.style.width = `${(100 * done) / Math.max(1, target)}%`;
  bar.append(fill);
  return h("div", {}, h("p", { class: "hint", id: "progress-text" }, `Question ${Math.min(done + 1, target)} of ${target}`), bar);
}

const central = () => survey.privacy_model === "central";

async function nextPair() {
  const asked = Number(params.get("n"));
  target = Number.isInteger(asked) && asked > 0 ? asked : Math.min(10, (survey.n_items * (survey.n_items - 1)) / 2);
  if (central()) target = Math.min(target, survey.max_comparisons_per_respondent);
  else if (survey.respondent_budget) target = Math.min(target, Math.floor((survey.respondent_budget + 1e-9) / client.epsilon));
  if (answered >= target) return thanks();
  let pairs;
  try {
    pairs = await client.pairs(Math.min(100, skipped.size + 1));
  } catch (err) {
    return failure(err);
  }
  const pair = pairs.find((p) => !skipped.has(`${p.a}|${p.b}`) && !skipped.has(`${p.b}|${p.a}`));
  if (!pair) return thanks();
  const choose = (winner) => async () => {
    for (const b of main.querySelectorAll("button")) b.disabled = true;
    try {
      await client.answer([{ a: pair.a, b: pair.b, winner }], { central: central() });
      answered += 1;
      say(central() ? `Answer ${answered} sent` : `Answer ${answered} sent (randomized on this device)`);
      await nextPair();
    } catch (err) {
      failure(err);
    }
  };
  show(
    progressBar(),
    h("h2", { id: "question" }, "Which matters more to you?"),
    h(
      "div",
      { class: "pair", role: "group", "aria-labelledby": "question", "data-serial": ++serial },
      h("button", { type: "button", id: "choice-a", onclick: choose(pair.a) }, pair.a_label),
      h("button", { type: "button", id: "choice-b", onclick: choose(pair.b) }, pair.b_label),
    ),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          id: "skip",
          onclick: () => {
            skipped.add(`${pair.a}|${pair.b}`);
            say("Skipped");
            nextPair();
          },
        },
        "Skip this pair",
      ),
      h("button", { type: "button", class: "secondary", id: "finish", onclick: () => thanks() }, "Finish"),
    ),
    central()
      ? h("p", { class: "hint" }, "Your answer is kept by the organizer and published only in differentially private summaries.")
      : h("p", { class: "hint" }, `Your answer is randomized here before it is sent (reported as given with probability ${pct(truthProbability(client.epsilon))}).`),
  );
  main.querySelector("#choice-a").focus();
}

// -- ranking --------------------------------------------------------------------------------------

async function rankingView() {
  let q;
  try {
    q = await client.question();
  } catch (err) {
    return failure(err);
  }
  if (q.answered) return thanks();
  const list = h("ol", { class: "rank-list", id: "rank-list", "aria-label": "Your ranking, most important first" });
  const render = (items) => {
    list.replaceChildren(
      ...items.map((it, k) => {
        const li = h(
          "li",
          { draggable: "true", "data-id": it.id },
          h("span", { class: "label" }, it.label),
          h("button", { type: "button", class: "secondary", "aria-label": `Move ${it.label} up`, disabled: k === 0, onclick: () => move(k, k - 1) }, "↑"),
          h("button", { type: "button", class: "secondary", "aria-label": `Move ${it.label} down`, disabled: k === items.length - 1, onclick: () => move(k, k + 1) }, "↓"),
        );
        li.addEventListener("dragstart", (ev) => {
          li.classList.add("dragging");
          ev.dataTransfer.setData(DRAG_TYPE, String(k));
        });
        li.addEventListener("dragend", () => li.classList.remove("dragging"));
        li.addEventListener("dragover", (ev) => ev.preventDefault());
        li.addEventListener("drop", (ev) => {
          ev.preventDefault();
          const from = Number(ev.dataTransfer.getData(DRAG_TYPE));
          if (ev.dataTransfer.types.includes(DRAG_TYPE) && Number.isInteger(from)) move(from, k);
        });
        return li;
      }),
    );
  };
  let order = q.items.slice();
  const move = (from, to) => {
    if (to < 0 || to >= order.length || from === to) return;
    const [it] = order.splice(from, 1);
    order.splice(to, 0, it);
    render(order);
    say(`${it.label} moved to place ${to + 1}`);
    const [up, down] = list.querySelectorAll("li")[to].querySelectorAll("button");
    const preferred = to > from ? down : up;
    (preferred.disabled ? (preferred === up ? down : up) : preferred).focus();
  };
  render(order);
  const submit = h("button", { type: "button", id: "submit-ranking" }, "Submit my ranking");
  submit.addEventListener("click", async () => {
    submit.disabled = true;
    try {
      await client.submitRanking(order.map((it) => it.id), q.items.map((it) => it.id));
      thanks();
    } catch (err) {
      failure(err);
    }
  });
  show(
    h("h2", { id: "question" }, "Put these items in order, most important first"),
    h("p", { class: "hint" }, "Drag an item, or use its ↑ and ↓ buttons (on a touch screen, use the buttons)."),
    list,
    h("div", { class: "actions" }, submit),
    h("p", { class: "hint" }, "Your ranking is randomized here before it is sent."),
  );
  list.querySelector("button:not([disabled])").focus();
}

// -- the end --------------------------------------------------------------------------------------

async function thanks() {
  let me = null;
  try {
    me = await client.me();
  } catch {
    /* the summary is optional */
  }
  show(
    h("h2", { id: "thanks" }, "Thank you!"),
    me
      ? h(
          "p",
          { id: "spent" },
          survey.kind === "ranking"
            ? `Your ranking was sent randomized. Privacy spent: ε = ${fmt(me.epsilon_total)} for moving one item, ` +
              `ε = ${fmt((me.epsilon_total * survey.n_items) / 2)} between any two rankings.`
            : central()
              ? `You answered ${me.comparisons} ${me.comparisons === 1 ? "pair" : "pairs"}.`
              : `You answered ${me.comparisons} ${me.comparisons === 1 ? "pair" : "pairs"}. Your total privacy spent is ε = ${fmt(me.epsilon_total)} (the sum over your answers).`,
        )
      : null,
    h(
      "p",
      { class: "hint" },
      central() ? "Only differentially private summaries of the answers are ever published." : "Every answer was randomized on this device before it was sent.",
    ),
  );
  main.querySelector("#thanks").setAttribute("tabindex", "-1");
  main.querySelector("#thanks").focus();
}

function failure(err) {
  if (err instanceof PrivrankError && err.status === 409 && /closed/.test(err.message)) {
    show(h("h2", { id: "closed", tabindex: "-1" }, "This survey has closed"), h("p", {}, "Your earlier answers were received. Thank you!"));
    main.querySelector("#closed").focus();
    return;
  }
  // "Try again" resends the same randomized report (privrank.js remembers it): a retry
  // never draws a new randomization of the same true answer.
  show(
    h("p", { class: "error", role: "alert", id: "failure" }, `Something went wrong: ${err.message}`),
    h("div", { class: "actions" }, h("button", { type: "button", id: "try-again", onclick: () => start() }, "Try again")),
  );
  main.querySelector("#try-again").focus();
}

start();
