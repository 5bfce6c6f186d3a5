/**
 * The pages' translations: message catalogs (static/i18n/<name>.<lang>.json, flat
 * {key: message}) and `t(key, params)`, which fills a message's {placeholders}. Numbers are
 * never part of a translated text: they are placeholders, formatted here for the page's
 * language (Intl.NumberFormat). English is every catalog's reference: a key missing from a
 * translation (the tests forbid it) would show in English rather than not at all.
 */

/** The languages the respondent page has catalogs for (the service's app.surveys.languages). */
export const LANGUAGES = ["en", "es", "de", "fr"];

let locale = "en";
const messages = {}; // the page's language
const english = {}; // the reference

async function fetchCatalog(name, lang) {
  const response = await fetch(`/static/i18n/${name}.${lang}.json`);
  if (!response.ok) throw new Error(`no ${lang} catalog for ${name}`);
  return response.json();
}

/**
 * Loads the catalogs `names` in `lang` (with English beneath) and makes `lang` the page's
 * language, <html lang> included. An unknown language is English. Catalogs loaded together
 * share one set of keys, so no two may have a key in common (the results catalog's keys
 * begin with "results."): a shared key would show one page's words on the other, and is
 * reported as an error.
 */
export async function loadCatalogs(names, lang = "en") {
  locale = LANGUAGES.includes(lang) ? lang : "en";
  const loaded = await Promise.all(
    names.flatMap((name) => [fetchCatalog(name, "en"), locale === "en" ? null : fetchCatalog(name, locale)]),
  );
  // A page that changes its language (the dashboard's picker) keeps none of the last one's words.
  for (const key of Object.keys(messages)) delete messages[key];
  for (const key of Object.keys(english)) delete english[key];
  const owner = {};
  for (let k = 0; k < loaded.length; k += 2) {
    for (const key of Object.keys(loaded[k])) {
      if (owner[key] && owner[key] !== names[k / 2])
        console.error(`catalogs ${owner[key]} and ${names[k / 2]} both have ${key}`);
      owner[key] = names[k / 2];
    }
    Object.assign(english, loaded[k]);
    Object.assign(messages, loaded[k + 1] || loaded[k]);
  }
  document.documentElement.lang = locale;
  return locale;
}

/**
 * The first of `wanted` (codes or tags such as "es-MX"), then of the browser's languages,
 * that has catalogs; else English. For when the service has not said (no such survey).
 */
export function preferredLanguage(...wanted) {
  const codes = [...wanted, ...(navigator.languages || [])].filter(Boolean);
  return codes.map((x) => x.split("-")[0].toLowerCase()).find((x) => LANGUAGES.includes(x)) || "en";
}

/** The page's language ("en", "es", …). */
export const language = () => locale;

/**
 * A number for the page's language: `num(1234.5)` is "1,234.5" in English, "1.234,5" in German;
 * a negative one with the minus sign U+2212 ("−0.5"), as dom.js's fmt and the charts write it.
 */
export const num = (x, options = {}) =>
  new Intl.NumberFormat(locale, options).format(x).replace(/-(?=[\d.,∞])/g, "−");

/** A number with exactly `d` decimals ("–" when there is none), as dom.js's fmt but for the page's language. */
export const fixed = (x, d = 2) =>
  x === null || x === undefined || Number.isNaN(x)
    ? "–"
    : num(Number(x), { minimumFractionDigits: d, maximumFractionDigits: d });

/** A date and time for the page's language. */
export const dateTime = (iso) => new Date(iso).toLocaleString(locale);

/** A language's name in the page's language: languageName("es") is "Spanish" on an English page. */
export const languageName = (code) => new Intl.DisplayNames([locale], { type: "language" }).of(code);

/** A number with `digits` significant digits, as the respondent page writes ε (0.001 stays 0.001). */
export const sig = (x, digits = 2) => num(Number(x), { maximumSignificantDigits: digits });

/**
 * An upper bound on a probability, for "at most …": as {@link percent} up to 99%; above,
 * rounded up (a bound may be overstated, never understated) with the fewest decimals that
 * keep it below 100% (99.4%, 99.995%), so that it reads as a number rather than ">99%".
 */
export function upTo(x) {
  if (!(x > 0.99)) return percent(x);
  for (let digits = 1; digits <= 8; digits += 1) {
    const scale = 10 ** (digits + 2);
    const up = Math.ceil(x * scale) / scale;
    if (up < 1) return num(up, { style: "percent", maximumFractionDigits: digits });
  }
  return num(1, { style: "percent" });
}

/** A probability as a percentage that never claims certainty: "<1%" and ">99%" at the ends. */
export const percent = (x) =>
  x < 0.01
    ? `<${num(0.01, { style: "percent" })}`
    : x > 0.99
      ? `>${num(0.99, { style: "percent" })}`
      : num(x, { style: "percent", maximumFractionDigits: 0 });

/**
 * The message `key` with its {placeholders} filled from `params` (numbers formatted for
 * the page's language; strings as they are). A message without a translation is English;
 * an unknown key is shown as itself (and logged).
 */
export function t(key, params = {}) {
  let text = messages[key] ?? english[key];
  if (text === undefined) {
    // Never in a tested page (the tests fail on console errors and check every key): the
    // page goes on with the key rather than stopping.
    console.error(`no message ${key}`);
    text = key;
  }
  return text.replace(/\{(\w+)\}/g, (whole, name) => {
    if (!(name in params)) return whole;
    const v = params[name];
    return typeof v === "number" ? num(v) : String(v);
  });
}

/**
 * Whether the page's catalogs have the message `key`: a sentence the server writes in
 * English is shown from the catalog by its code only when the catalog knows the code
 * (server-words.js), and as the server wrote it otherwise.
 */
export const hasMessage = (key) => key in english;

/**
 * The page in each of `codes`, as links that set ?lang= (the rest of the address kept), each
 * language named in itself ("Deutsch", "Français"); `current` is marked, not a link. A
 * <footer> for the respondent and results pages, named by `label` (each page's own catalog
 * says "Languages").
 */
export function languageFooter(codes, current, label) {
  const own = (code) => {
    const name = new Intl.DisplayNames([code], { type: "language" }).of(code);
    return name.charAt(0).toLocaleUpperCase(code) + name.slice(1);
  };
  const entries = codes.map((code) => {
    if (code === current) {
      const el = document.createElement("strong");
      el.setAttribute("aria-current", "true");
      el.lang = code;
      el.textContent = own(code);
      return el;
    }
    const url = new URL(location.href);
    url.searchParams.set("lang", code);
    const a = document.createElement("a");
    a.href = url.pathname + url.search;
    a.lang = code;
    a.hreflang = code;
    a.textContent = own(code);
    return a;
  });
  const nav = document.createElement("nav");
  nav.setAttribute("aria-label", label);
  nav.append(...entries.flatMap((el, k) => (k ? [" · ", el] : [el])));
  const footer = document.createElement("footer");
  footer.className = "languages hint";
  footer.id = "languages";
  footer.append(nav);
  return footer;
}

/**
 * Translates a page's fixed markup under `root`: an element with data-i18n="key" gets the
 * message as its text, one with data-i18n-label="key" as its aria-label.
 */
export function translateStatic(root = document) {
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll("[data-i18n-label]"))
    el.setAttribute("aria-label", t(el.dataset.i18nLabel));
}

/**
 * A message that depends on a count `n`: `key.one` or `key.other`, chosen by the page's
 * language's plural rules (French says "1 paire" and "0 paire"), with {n} filled in.
 */
export function tn(key, n, params = {}) {
  const form = new Intl.PluralRules(locale).select(n) === "one" ? "one" : "other";
  return t(`${key}.${form}`, { n, ...params });
}
