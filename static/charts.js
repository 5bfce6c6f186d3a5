/**
 * Small SVG charts for the dashboard and the public results page, drawn with the DOM (no library, no inline styles).
 * Every chart is an <svg role="img"> with a <title> and <desc>, and every value it
 * shows is also written as text, so it reads without colour.
 */
import { h } from "/static/dom.js";
import { fixed, t } from "/static/i18n.js";

const NS = "http://www.w3.org/2000/svg";
let uid = 0;

export function svgEl(tag, attrs = {}, text = null) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== null) el.textContent = text;
  return el;
}

function frame(width, height, title, desc) {
  const id = `chart-${++uid}`;
  const svg = svgEl("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-labelledby": `${id}-title ${id}-desc`,
  });
  svg.append(svgEl("title", { id: `${id}-title` }, title), svgEl("desc", { id: `${id}-desc` }, desc));
  return svg;
}

/** `text` cut to `max` characters with "…". */
const cut = (text, max) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** A label cut to `max` characters with "…", the full text in a <title> tooltip. */
function label(attrs, text, max = 24) {
  const el = svgEl("text", attrs, cut(text, max));
  if (text.length > max) el.append(svgEl("title", {}, text));
  return el;
}

let measure = null;
/**
 * The width in px of `text` in the charts' 12px font (style.css: `.chart text`), measured
 * on a canvas so that a chart can make room for its text before it is on the page; an
 * estimate on the wide side where there is no canvas.
 */
export function textWidth(text, px = 12) {
  try {
    measure ??= document.createElement("canvas").getContext("2d");
    measure.font = `${px}px system-ui, sans-serif`;
    return measure.measureText(text).width;
  } catch {
    return text.length * px * 0.7;
  }
}

/** The width of the widest of `texts` (0 when there is none), rounded up. */
const widest = (texts) => Math.ceil(Math.max(0, ...texts.map((t) => textWidth(t))));

/**
 * A visually hidden table with the same numbers as a chart, for screen readers. It sits in
 * a visually hidden box: a table is never narrower than its cells, so on its own it would
 * widen the page (a phone could scroll sideways to nothing).
 */
export function hiddenTable(caption, header, rows) {
  return h(
    "div",
    { class: "visually-hidden" },
    h(
      "table",
      {},
      h("caption", {}, caption),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          header.map((x) => h("th", { scope: "col" }, x)),
        ),
      ),
      h(
        "tbody",
        {},
        rows.map((r) =>
          h(
            "tr",
            {},
            r.map((x, k) => h(k === 0 ? "th" : "td", { scope: k === 0 ? "row" : null }, x)),
          ),
        ),
      ),
    ),
  );
}

/**
 * Round axis ticks covering [min, max]: a step of 1, 2, 2.5 or 5 times a power of ten
 * giving about `target` intervals, the domain widened to whole steps, and labels with
 * the decimals the step needs (−3, −2, −1, 0 rather than −3.01, −1.39, 0.23), written
 * the page's language's way (`<html lang>`: 0,5 in German).
 * Returns {min, max, ticks: [{value, text}]}.
 */
export function niceTicks(min, max, target = 4) {
  const raw = (max - min) / target;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * power).find((s) => s >= raw * (1 - 1e-9));
  const lo = Math.floor(min / step + 1e-9) * step;
  const hi = Math.ceil(max / step - 1e-9) * step;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) + (step / power === 2.5 ? 1 : 0);
  const locale = globalThis.document?.documentElement.lang || "en";
  const number = new Intl.NumberFormat(locale, {
    minimumFractionDigits: decimals,
    maximumFractionDigits: decimals,
    useGrouping: false,
  });
  const ticks = [];
  for (let k = 0; lo + k * step <= hi + step * 1e-9; k++) {
    const value = lo + k * step;
    const text = number.format(Math.abs(value) < step * 1e-9 ? 0 : value).replace("-", "−");
    ticks.push({ value, text });
  }
  return { min: lo, max: hi, ticks };
}

/**
 * Horizontal error-bar chart: one row per item (in the given order), a dot at
 * `value` and whiskers over [lo, hi].
 * rows: [{label, value, lo, hi, note}]
 */
export function errorBarChart(rows, { title, desc, axisLabel = "score" }) {
  // The label and note columns are as wide as their text (labels cut to 24 characters),
  // so that nothing is clipped at the chart's edges.
  const notes = rows.map((r) => r.note ?? fixed(r.value));
  const labelW = Math.max(40, widest(rows.map((r) => cut(r.label, 24))) + 14);
  const noteW = Math.max(30, widest(notes) + 16);
  const plotW = 420;
  const rowH = 28;
  const top = 30;
  const height = top + rows.length * rowH + 36;
  const width = labelW + plotW + noteW;
  const values = rows
    .flatMap((r) => [r.value, r.lo ?? r.value, r.hi ?? r.value])
    .filter((v) => Number.isFinite(v));
  let min = Math.min(...values);
  let max = Math.max(...values);
  if (!(max > min)) {
    min -= 1;
    max += 1;
  }
  const axis = niceTicks(min, max);
  min = axis.min;
  max = axis.max;
  const x = (v) => labelW + ((v - min) / (max - min)) * plotW;
  const svg = frame(width, height, title, desc);
  // Axis with ticks.
  const axisY = top + rows.length * rowH + 4;
  svg.append(svgEl("line", { x1: labelW, x2: labelW + plotW, y1: axisY, y2: axisY, stroke: "#1b1b1b" }));
  for (const t of axis.ticks) {
    svg.append(
      svgEl("line", { x1: x(t.value), x2: x(t.value), y1: axisY, y2: axisY + 5, stroke: "#1b1b1b" }),
    );
    svg.append(
      svgEl("text", { x: x(t.value), y: axisY + 18, "text-anchor": "middle", class: "tick" }, t.text),
    );
  }
  svg.append(svgEl("text", { x: labelW + plotW / 2, y: 16, "text-anchor": "middle" }, axisLabel));
  if (min < 0 && max > 0) {
    svg.append(
      svgEl("line", {
        x1: x(0),
        x2: x(0),
        y1: top - 6,
        y2: axisY,
        stroke: "#9aa0a6",
        "stroke-dasharray": "3 3",
      }),
    );
  }
  rows.forEach((r, k) => {
    const y = top + k * rowH + rowH / 2;
    const g = svgEl("g", { class: "row" });
    g.append(label({ x: labelW - 8, y: y + 4, "text-anchor": "end" }, r.label));
    if (Number.isFinite(r.lo) && Number.isFinite(r.hi)) {
      g.append(
        svgEl("line", { x1: x(r.lo), x2: x(r.hi), y1: y, y2: y, stroke: "#1b1b1b", "stroke-width": 2 }),
      );
      for (const end of [r.lo, r.hi]) {
        g.append(
          svgEl("line", {
            x1: x(end),
            x2: x(end),
            y1: y - 6,
            y2: y + 6,
            stroke: "#1b1b1b",
            "stroke-width": 2,
          }),
        );
      }
    }
    if (Number.isFinite(r.value)) {
      g.append(svgEl("circle", { cx: x(r.value), cy: y, r: 5, fill: "#0b57d0", stroke: "#1b1b1b" }));
    }
    g.append(svgEl("text", { x: labelW + plotW + 10, y: y + 4 }, notes[k]));
    svg.append(g);
  });
  return svg;
}

/**
 * A shared score scale for `rows` ({value, lo, hi}; nulls ignored): round ticks from
 * niceTicks, or null when no row has a score.
 */
export function scoreScale(rows) {
  const values = rows
    .flatMap((r) => [r.value, r.lo, r.hi])
    .filter((v) => v !== null && v !== undefined && Number.isFinite(v));
  if (!values.length) return null;
  let min = Math.min(...values);
  let max = Math.max(...values);
  if (!(max > min)) {
    min -= 1;
    max += 1;
  }
  return niceTicks(min, max);
}

const STRIP_W = 300;
const STRIP_PAD = 10;
const stripX = (scale, v) =>
  STRIP_PAD + ((v - scale.min) / (scale.max - scale.min)) * (STRIP_W - 2 * STRIP_PAD);

/**
 * The axis of a column of interval strips: the scale's ticks, `caption` above them;
 * `describe(from, to)` says its span for screen readers, in the page's words.
 * Scales with its box like the strips (class "strip"), so it reads on a phone.
 */
export function stripAxis(scale, caption, describe) {
  const svg = frame(STRIP_W, 34, caption, describe(scale.ticks[0].text, scale.ticks.at(-1).text));
  svg.setAttribute("class", "strip");
  svg.append(svgEl("text", { x: STRIP_W / 2, y: 11, "text-anchor": "middle", class: "tick" }, caption));
  svg.append(svgEl("line", { x1: STRIP_PAD, x2: STRIP_W - STRIP_PAD, y1: 30, y2: 30, stroke: "#1b1b1b" }));
  for (const t of scale.ticks) {
    const x = stripX(scale, t.value);
    svg.append(svgEl("line", { x1: x, x2: x, y1: 26, y2: 34, stroke: "#1b1b1b" }));
    svg.append(svgEl("text", { x, y: 23, "text-anchor": "middle", class: "tick" }, t.text));
  }
  return svg;
}

/**
 * One item's score on a shared `scale` (from scoreScale) as a strip that scales with its
 * box: a bar over the interval [lo, hi] when there is one, a dot at the score, and a
 * dashed line at 0 when the scale spans it. `title` and `desc` name it for screen readers.
 */
export function intervalStrip({ value, lo, hi }, scale, { title, desc }) {
  const height = 22;
  const y = height / 2;
  const x = (v) => stripX(scale, v);
  const svg = frame(STRIP_W, height, title, desc);
  svg.setAttribute("class", "strip");
  const interval = Number.isFinite(lo) && Number.isFinite(hi);
  // The grey track is the scale the interval sits on; without an interval it would read as
  // one (a bar across the whole width), so a score alone is a dot on the zero line's scale.
  if (interval) {
    svg.append(
      svgEl("line", {
        x1: STRIP_PAD,
        x2: STRIP_W - STRIP_PAD,
        y1: y,
        y2: y,
        stroke: "#d5d8dd",
        "stroke-width": 2,
        class: "track",
      }),
    );
  }
  if (scale.min < 0 && scale.max > 0) {
    svg.append(
      svgEl("line", {
        x1: x(0),
        x2: x(0),
        y1: 1,
        y2: height - 1,
        stroke: "#9aa0a6",
        "stroke-dasharray": "3 3",
      }),
    );
  }
  if (interval) {
    svg.append(
      svgEl("rect", {
        x: x(lo),
        y: y - 5,
        width: Math.max(1, x(hi) - x(lo)),
        height: 10,
        rx: 5,
        fill: "#a8c7fa",
        stroke: "#0b57d0",
        class: "interval",
      }),
    );
  }
  if (Number.isFinite(value)) {
    svg.append(
      svgEl("circle", { cx: x(value), cy: y, r: 6, fill: "#0b57d0", stroke: "#1b1b1b", class: "score" }),
    );
  }
  return svg;
}

/**
 * Heatmap of an m×m matrix with the value printed in every cell.
 * cells: matrix of numbers or null; labels: row/column labels.
 */
export function heatmap(cells, labels, { title, desc, max = null, format = (v) => String(v) }) {
  const m = labels.length;
  const cell = m <= 8 ? 56 : m <= 15 ? 40 : 28;
  // Room for the row labels (cut to 22 characters) on the left, and for the column labels
  // (cut to 18) rotated by 45° above the cells and past the last column on the right.
  const labelW = widest(labels.map((l) => cut(l, 22))) + 12;
  const slant = Math.ceil(Math.SQRT1_2 * (widest(labels.map((l) => cut(l, 18))) + 12));
  const top = slant + 12;
  const width = labelW + m * cell - cell / 2 + Math.max(cell / 2, slant + 4);
  const height = top + m * cell + 10;
  const flat = cells.flat().filter((v) => v !== null && Number.isFinite(v));
  const hi = max ?? Math.max(1e-12, ...flat);
  const svg = frame(width, height, title, desc);
  labels.forEach((lab, c) => {
    const cx = labelW + c * cell + cell / 2;
    svg.append(label({ x: cx, y: top - 6, transform: `rotate(-45 ${cx} ${top - 6})` }, lab, 18));
  });
  labels.forEach((lab, r) => {
    svg.append(label({ x: labelW - 6, y: top + r * cell + cell / 2 + 4, "text-anchor": "end" }, lab, 22));
    for (let c = 0; c < m; c++) {
      const v = cells[r][c];
      const x0 = labelW + c * cell;
      const y0 = top + r * cell;
      if (v === null || !Number.isFinite(v)) {
        svg.append(
          svgEl("rect", { x: x0, y: y0, width: cell, height: cell, fill: "#ffffff", stroke: "#d5d8dd" }),
        );
        svg.append(
          svgEl(
            "text",
            { x: x0 + cell / 2, y: y0 + cell / 2 + 4, "text-anchor": "middle", fill: "#5c5f66" },
            "–",
          ),
        );
        continue;
      }
      const t = Math.max(0, Math.min(1, v / hi));
      // White to dark blue; the text is black or white, whichever contrasts more (WCAG luminance).
      const rgb = [Math.round(240 - 230 * t), Math.round(244 - 194 * t), Math.round(255 - 95 * t)];
      const lum = rgb
        .map((c) => c / 255)
        .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4))
        .reduce((acc, c, k) => acc + c * [0.2126, 0.7152, 0.0722][k], 0);
      const ink = (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) ? "#000000" : "#ffffff";
      svg.append(
        svgEl("rect", {
          x: x0,
          y: y0,
          width: cell,
          height: cell,
          fill: `rgb(${rgb.join(",")})`,
          stroke: "#ffffff",
        }),
      );
      svg.append(
        svgEl(
          "text",
          { x: x0 + cell / 2, y: y0 + cell / 2 + 4, "text-anchor": "middle", fill: ink },
          format(v),
        ),
      );
    }
  });
  return svg;
}

/** A horizontal bar of `spent` out of `total` with the figures as text. */
export function budgetBar(spent, total) {
  const bar = h("span");
  bar.style.width = `${Math.min(100, (100 * spent) / total)}%`;
  return h(
    "div",
    {
      class: "budget-bar",
      role: "meter",
      "aria-valuemin": "0",
      "aria-valuemax": String(total),
      "aria-valuenow": String(spent),
      "aria-label": t("chart.budget", { spent: fixed(spent), total: fixed(total) }),
    },
    bar,
  );
}
