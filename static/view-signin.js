/** The dashboard's sign-in form: an admin, analyst or moderator key, kept only in this tab. */
import { whoAmI } from "/static/api.js";
import { announce, h } from "/static/dom.js";
import { t } from "/static/i18n.js";
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
    h("h2", {}, t("signin.title")),
    h("p", { id: "signin-help", class: "hint" }, t("signin.help")),
    h(
      "div",
      { class: "field" },
      h("label", { for: "key" }, t("signin.key")),
      h("input", { id: "key", type: "password", autocomplete: "off", required: true }),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, t("signin.submit"))),
    msg,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    storeKey(form.querySelector("#key").value.trim());
    try {
      session.role = await whoAmI();
      announce(t("signin.signed_in", { role: t(`role.${session.role}`) }));
      session.route();
    } catch (err) {
      forgetKey();
      signInView(err.status === 401 ? t("signin.refused") : err.message);
      return;
    }
  });
  app.replaceChildren(h("div", { class: "panel narrow" }, form));
  document.getElementById("sign-out").hidden = true;
  form.querySelector("#key").focus();
}
