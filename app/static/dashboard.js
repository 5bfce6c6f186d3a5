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
 * The shell's words (index.html, the survey list, the new-survey form, the planners) come
 * from the "dashboard" catalog (app/static/i18n/dashboard.<lang>.json, through i18n.js's
 * t()); English is the only one so far, and adding a language is adding its catalog.
 */
import { showError, whoAmI } from "/static/api.js";
import { loadCatalogs, t, translateStatic } from "/static/i18n.js";
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

await loadCatalogs(["dashboard"], "en");
translateStatic(document);
document.title = t("page.title");

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
