/**
 * The DOM helpers every page shares (the dashboard, the respondent page and the charts):
 * building elements, formatting numbers, the live region, and the dashboard's panels.
 * Written once here; nothing in this module touches the page when it is imported. The
 * dashboard's words here come from its catalog ("scores.", "chart.").
 */
import { num, t } from "/static/i18n.js";

/**
 * An element: `attrs` become attributes (a key starting with "on" adds an event
 * listener, "text" sets the text; null, undefined and false are left out, true is an
 * empty attribute), then `children` (nested arrays flattened; strings become text).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** A number with `d` decimals; "–" when there is none. */
export const fmt = (x, d = 2) =>
  x === null || x === undefined || Number.isNaN(x) ? "–" : minus(Number(x).toFixed(d));

/**
 * A number's text with its minus sign as U+2212 (−), the sign every number on the pages
 * is written with (typography's minus, as wide as the plus; a hyphen-minus "-" would be
 * narrower and mix with it).
 */
export const minus = (text) => text.replace(/-(?=[\d.,∞])/g, "−");

/** A probability as a percentage that never claims certainty: "<1%" and ">99%" at the ends. */
export const pct = (x) => (x < 0.01 ? "<1%" : x > 0.99 ? ">99%" : `${(100 * x).toFixed(0)}%`);

/** A number with `digits` significant digits, as the respondent page writes ε (0.001 stays 0.001). */
export const fmtSignificant = (x, digits = 2) => minus(String(Number(Number(x).toPrecision(digits))));

/**
 * What a Bradley–Terry score means, in words: the dashboard's "scores.bt.pairwise" (what a
 * respondent prefers), or "scores.bt.ranking" (`implied`: the pairs that rankings imply). A gap
 * d between two scores means odds of e^d : 1, a probability of 1/(1+e^−d), that the
 * higher-scored item wins: e ≈ 2.7 (73%) for d = 1, e² ≈ 7.4 (88%) for d = 2.
 */
export const bradleyTerryText = (implied = false) =>
  t(implied ? "scores.bt.ranking" : "scores.bt.pairwise", {
    gap1: num(1),
    gap2: num(2),
    odds1: num(2.7),
    odds2: num(7.4),
    p1: num(0.73, { style: "percent" }),
    p2: num(0.88, { style: "percent" }),
  });

/** Says `text` through the page's live region (#status), for screen-reader users. */
export function announce(text) {
  document.getElementById("status").textContent = text;
}

/** A dashboard panel: a <section> labelled by its <h3>. */
export function section(id, title, ...children) {
  return h(
    "section",
    { class: "panel", "aria-labelledby": `${id}-h`, id },
    h("h3", { id: `${id}-h` }, title),
    ...children,
  );
}

/** A labelled number input (a dashboard form field). */
export function numberField(id, label, value, attrs = {}) {
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    h("input", { id, type: "number", step: "any", value, ...attrs }),
  );
}

/**
 * A box that scrolls sideways when `child` is wider than the screen (a table, a chart),
 * so that the page itself never does. It is a named region in the tab order, so that
 * keyboard users can scroll it too.
 */
export function scrollBox(className, label, child) {
  return h("div", { class: className, tabindex: "0", role: "region", "aria-label": label }, child);
}

/** A table in its scrolling box, named `label`. */
export function tableWrap(label, table) {
  return scrollBox("table-wrap", label, table);
}

/** The scrolling box a chart sits in, named after the chart's title. */
export function chartBox(svg) {
  const title = svg.querySelector("title")?.textContent || t("chart.default");
  return scrollBox("chart", title, svg);
}

/**
 * Re-runs `load` every 30 s while the tab is visible, the URL's hash is unchanged and
 * the element #`markerId` is still on screen; stops once the view is gone.
 */
export function autoRefresh(load, markerId) {
  const hash = location.hash;
  const timer = setInterval(() => {
    if (location.hash !== hash || !document.body.contains(document.getElementById(markerId))) {
      clearInterval(timer);
      return;
    }
    if (!document.hidden) load().catch(() => {});
  }, 30_000);
}
