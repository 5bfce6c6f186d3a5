/**
 * A survey's public results (GET /v1/surveys/{id}/results) as page content: when and from
 * how many answers, the release for central surveys, the service's plain-language note,
 * and the ranked items, each with its score interval drawn on a shared scale (charts.js)
 * and written as text, its comparisons, and a "new" marker for items added later.
 * Used by the public results page (/r/{id}, results.js) and at the end of the respondent
 * page (respond-end.js). Nothing here touches the page when it is imported. Its words
 * are the "results" catalog's (i18n.js): the page loads it first.
 */
import { intervalStrip, scoreScale, stripAxis } from "/static/charts.js";
import { h } from "/static/dom.js";
import { fixed, language, t, tn } from "/static/i18n.js";

const HOUR_MS = 3_600_000;

/** When: a date and time in the page's language. */
const when = (iso) => new Date(iso).toLocaleString(language(), { dateStyle: "medium", timeStyle: "short" });

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
 * How to read the results, in the page's language: the service's note sentences by name
 * (`notes`, each the catalog's "results.note.<code>"), else its English `note`.
 */
export function noteText(r) {
  if (!r.notes?.length) return r.note || "";
  return r.notes
    .map(({ code, params = {} }) =>
      code === "withheld" ? tn("results.note.withheld", params.n, params) : t(`results.note.${code}`, params),
    )
    .join(" ");
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
    counts.push(tn("results.respondents", r.respondents));
  if (r.comparisons !== null && r.comparisons !== undefined)
    counts.push(tn("results.comparisons", r.comparisons));
  out.push(
    h(
      "p",
      { id: `${idPrefix}-summary` },
      counts.length
        ? t("results.summary.counts", { when: when(r.as_of), counts: counts.join(", ") })
        : t("results.summary.plain", { when: when(r.as_of) }),
    ),
  );
  if (r.release) {
    out.push(
      h(
        "p",
        { id: `${idPrefix}-release` },
        t("results.release", { when: when(r.release.created_at), eps: fixed(r.release.epsilon) }),
      ),
    );
  }
  const note = noteText(r);
  if (note) out.push(h("p", { class: "notice", id: `${idPrefix}-note` }, note));

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
        it.score === null || it.score === undefined
          ? t("results.item.no_score")
          : t("results.item.score", { score: fixed(it.score) }),
        it.ci ? t("results.item.range", { lo: fixed(it.ci[0]), hi: fixed(it.ci[1]) }) : null,
        it.comparisons === null || it.comparisons === undefined
          ? null
          : tn("results.comparisons", it.comparisons),
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
            ? h("span", { class: "badge new", title: t("results.item.new_title") }, t("results.item.new"))
            : null,
        ),
        scale && Number.isFinite(it.score)
          ? intervalStrip(rows[k], scale, {
              title: t(it.ci ? "results.item.chart_ci" : "results.item.chart", { label: it.label }),
              desc: text,
            })
          : null,
        h(
          "p",
          { class: "result-figures" },
          text,
          isNew ? h("span", { class: "hint" }, ` · ${t("results.item.added_later")}`) : null,
        ),
      );
    }),
  );
  out.push(
    h(heading, { id: headingId }, t("results.ranking.title")),
    h(
      "p",
      { class: "hint" },
      t(rows.some((x) => x.lo !== null) ? "results.ranking.hint" : "results.ranking.hint_no_ci"),
    ),
    scale
      ? h(
          "div",
          { class: "strip-axis" },
          stripAxis(scale, t("results.ranking.axis"), (from, to) =>
            t("results.ranking.axis_span", { from, to }),
          ),
        )
      : null,
    list,
  );
  return out.filter(Boolean);
}
