/**
 * The admin/analyst dashboard's router. Sign in with a key (kept in sessionStorage, sent
 * only as an Authorization header — never in a URL), list and create surveys, and per
 * survey: progress, coverage, the ranking with intervals, the win-probability matrix,
 * releases and the budget (central surveys), consensus methods (ranking surveys),
 * exports, open/close. Routes live in the URL hash: #/, #/new, #/keys, #/survey/{id}.
 *
 * The modules: dom.js (element and number helpers), session.js (key, role, main
 * element), api.js (requests), charts.js (SVG), and one view-*.js per view.
 *
 * Every word the dashboard shows comes from the "dashboard" catalog
 * (static/i18n/dashboard.<lang>.json, through i18n.js's t()), in English, Spanish,
 * German and French; adding a language is adding its catalog. The language is the one the
 * user picks in the header (kept in localStorage), else the browser's (preferredLanguage);
 * picking another re-renders the current view, <html lang> included.
 */
import { showError, whoAmI } from "/static/api.js";
import { LANGUAGES, language, loadCatalogs, preferredLanguage, t, translateStatic } from "/static/i18n.js";
import { app, forgetKey, session, storedKey } from "/static/session.js";
import { keysView } from "/static/view-keys.js";
import { newSurveyView } from "/static/view-new-survey.js";
import { signInView } from "/static/view-signin.js";
import { surveyView } from "/static/view-survey.js";
import { listView } from "/static/view-surveys.js";

/** Renders the view the URL's hash names (signing in first when no key is stored). */
async function route() {
  if (!storedKey()) {
    signInView();
    return;
  }
  document.getElementById("sign-out").hidden = false;
  try {
    if (!session.role) session.role = await whoAmI();
    document.getElementById("nav-new").hidden = session.role !== "admin";
    document.getElementById("nav-keys").hidden = session.role !== "admin";
    const hash = location.hash || "#/";
    const m = hash.match(/^#\/survey\/([A-Za-z0-9_]+)$/);
    if (hash === "#/new") newSurveyView();
    else if (hash === "#/keys" || hash.startsWith("#/keys?")) await keysView();
    else if (m) await surveyView(m[1]);
    else await listView(); // #/, #/?show=N, and any unknown route
  } catch (err) {
    if (err.status === 401) return;
    showError(app, err);
  }
}

session.route = route;

/** Where the language the user picked is kept (localStorage: every tab, across visits). */
const PICKED = "privrank.dashboard.language";

function pickedLanguage() {
  try {
    return localStorage.getItem(PICKED);
  } catch {
    return null; // storage refused (a private window's policy): the browser's language
  }
}

/** Loads the catalog in `lang` and translates the shell: markup, tab title, the picker. */
async function useLanguage(lang) {
  await loadCatalogs(["dashboard"], lang);
  translateStatic(document);
  document.title = t("page.title");
  document.getElementById("ui-language").value = language();
}

/** The header's language picker: each language named in itself ("Deutsch", "Français"). */
function languagePicker() {
  const picker = document.getElementById("ui-language");
  picker.replaceChildren(
    ...LANGUAGES.map((code) => {
      const name = new Intl.DisplayNames([code], { type: "language" }).of(code);
      const option = document.createElement("option");
      option.value = code;
      option.lang = code;
      option.textContent = name.charAt(0).toLocaleUpperCase(code) + name.slice(1);
      return option;
    }),
  );
  picker.addEventListener("change", async () => {
    try {
      localStorage.setItem(PICKED, picker.value);
    } catch {
      // not remembered: this page still changes
    }
    await useLanguage(picker.value);
    await route();
    picker.focus();
  });
}

languagePicker();
await useLanguage(pickedLanguage() || preferredLanguage());

document.getElementById("sign-out").addEventListener("click", () => {
  forgetKey();
  session.role = null;
  document.getElementById("nav-keys").hidden = true;
  location.hash = "#/";
  signInView();
});
window.addEventListener("hashchange", async () => {
  await route();
  // Move focus into the new view for keyboard and screen-reader users, unless the view
  // already focused its first field.
  if (!app.contains(document.activeElement)) app.focus();
});
route();
