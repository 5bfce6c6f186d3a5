/**
 * A survey's public results (GET /v1/surveys/{id}/results) as page content: when and from
 * how many answers, the release for central surveys, the service's plain-language note,
 * and the ranked items, each with its score interval drawn on a shared scale (charts.js)
 * and written as text, its comparisons, and a "new" marker for items added later.
 * Used by the public results page (/r/{id}, results.js) and at the end of the respondent
 * page (respond-end.js). Nothing here touches the page when it is imported.
 */
import { intervalStrip, scoreScale, stripAxis } from "/static/charts.js";
import { fmt, h } from "/static/dom.js";

const HOUR_MS = 3_600_000;

/** When: a date and time in the reader's locale. */
const when = (iso) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

/**
 * The ids of the items added more than an hour after the first one: they have had less
 * time to be compared, so their intervals are wider.
 */
export function addedLater(items) {
  const times = items.map((it) => Date.parse(it.added_at)).filter(Number.isFinite);
  if (!times.length) return new Set();
  const first = Math.min(...times);
  return new Set(items.filter((it) => Date.parse(it.added_at) - first > HOUR_MS).map((it) => it.item_id));
}

/**
 * The results as a list of nodes. `level`: the heading level of its sections (2 on the
 * results page under the survey's title, 3 inside the respondent page's thanks);
 * `idPrefix` keeps ids unique.
 */
export function resultsContent(r, { level = 2, idPrefix = "results" } = {}) {
  const heading = `h${level}`;
  const late = addedLater(r.items);
  const out = [];
  const counts = [];
  if (r.respondents !== null && r.respondents !== undefined)
    counts.push(plural(r.respondents, "respondent", "respondents"));
  if (r.comparisons !== null && r.comparisons !== undefined)
    counts.push(plural(r.comparisons, "comparison", "comparisons"));
  out.push(
    h(
      "p",
      { id: `${idPrefix}-summary` },
      `As of ${when(r.as_of)}`,
      counts.length ? `: ${counts.join(", ")}.` : ".",
    ),
  );
  if (r.release) {
    out.push(
      h(
        "p",
        { id: `${idPrefix}-release` },
        `Results released on ${when(r.release.created_at)}, with differential privacy (ε = ${fmt(r.release.epsilon)} for this release): ` +
          "they reveal almost nothing about any one person's answers.",
      ),
    );
  }
  if (r.note) out.push(h("p", { class: "notice", id: `${idPrefix}-note` }, r.note));

  const rows = r.items.map((it) => ({
    value: it.score,
    lo: it.ci ? it.ci[0] : null,
    hi: it.ci ? it.ci[1] : null,
  }));
  const scale = scoreScale(rows);
  const headingId = `${idPrefix}-ranking-h`;
  const list = h(
    "ol",
    { class: "results-list", id: `${idPrefix}-list`, "aria-labelledby": headingId },
    r.items.map((it, k) => {
      const isNew = late.has(it.item_id);
      const text = [
        it.score === null || it.score === undefined ? "no score yet" : `score ${fmt(it.score)}`,
        it.ci ? `plausible range ${fmt(it.ci[0])} to ${fmt(it.ci[1])}` : null,
        it.comparisons === null || it.comparisons === undefined
          ? null
          : plural(it.comparisons, "comparison", "comparisons"),
      ]
        .filter(Boolean)
        .join(" · ");
      return h(
        "li",
        { "data-item": it.item_id, class: isNew ? "late" : null },
        h(
          "div",
          { class: "result-head" },
          h("span", { class: "rank" }, `${it.rank}.`),
          h("span", { class: "result-label" }, it.label),
          isNew
            ? h(
                "span",
                { class: "badge new", title: "Added after the survey started: fewer comparisons so far" },
                "new",
              )
            : null,
        ),
        scale && Number.isFinite(it.score)
          ? intervalStrip(rows[k], scale, {
              title: `${it.label}: ${it.ci ? "score and interval" : "score"}`,
              desc: text,
            })
          : null,
        h(
          "p",
          { class: "result-figures" },
          text,
          isNew ? h("span", { class: "hint" }, " · added later, so fewer comparisons so far") : null,
        ),
      );
    }),
  );
  out.push(
    h(heading, { id: headingId }, "Ranking"),
    h(
      "p",
      { class: "hint" },
      "Most preferred first. A dot is an item's estimated score, its bar the range the score plausibly lies in.",
    ),
    scale ? h("div", { class: "strip-axis" }, stripAxis(scale, "Score (higher is preferred)")) : null,
    list,
  );
  return out.filter(Boolean);
}
