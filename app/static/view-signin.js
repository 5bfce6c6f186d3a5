/** The dashboard's sign-in form: an admin, analyst or moderator key, kept only in this tab. */
import { whoAmI } from "/static/api.js";
import { announce, h } from "/static/dom.js";
import { app, forgetKey, session, storeKey } from "/static/session.js";

export function signInView(message) {
  const msg = h(
    "p",
    { id: "signin-msg", class: message ? "error" : "hint", role: message ? "alert" : null },
    message || "",
  );
  const form = h(
    "form",
    { id: "signin", "aria-describedby": "signin-help" },
    h("h2", {}, "Sign in"),
    h(
      "p",
      { id: "signin-help", class: "hint" },
      "Use an admin, analyst or moderator key. It is kept only in this tab (session storage) and sent as an " +
        "Authorization header; it never appears in a URL. Integration keys, respondent tokens and site " +
        "credentials do not open the dashboard.",
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "key" }, "API key"),
      h("input", { id: "key", type: "password", autocomplete: "off", required: true }),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
    msg,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    storeKey(form.querySelector("#key").value.trim());
    try {
      session.role = await whoAmI();
      announce(`Signed in as ${session.role}`);
      session.route();
    } catch (err) {
      forgetKey();
      signInView(err.status === 401 ? "That key was not accepted." : err.message);
      return;
    }
  });
  app.replaceChildren(h("div", { class: "panel narrow" }, form));
  document.getElementById("sign-out").hidden = true;
  form.querySelector("#key").focus();
}
