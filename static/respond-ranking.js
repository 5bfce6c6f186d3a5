/** The respondent page's ranking: drag (or move with ↑/↓) the items into order, sent as a randomized copy. */
import { announce, h } from "/static/dom.js";
import { t } from "/static/i18n.js";
import { failure, thanks } from "/static/respond-end.js";
import { client, show } from "/static/respond-state.js";

const DRAG_TYPE = "application/x-privrank-item";

export async function rankingView() {
  let q;
  try {
    q = await client.question();
  } catch (err) {
    return failure(err);
  }
  if (q.answered) return thanks();
  const list = h("ol", {
    class: "rank-list",
    id: "rank-list",
    "aria-label": t("ranking.list"),
  });
  const render = (items) => {
    list.replaceChildren(
      ...items.map((it, k) => {
        const li = h(
          "li",
          { draggable: "true", "data-id": it.id },
          h("span", { class: "label" }, it.label),
          h(
            "button",
            {
              type: "button",
              class: "secondary",
              "aria-label": t("ranking.up", { label: it.label }),
              disabled: k === 0,
              onclick: () => move(k, k - 1),
            },
            "↑",
          ),
          h(
            "button",
            {
              type: "button",
              class: "secondary",
              "aria-label": t("ranking.down", { label: it.label }),
              disabled: k === items.length - 1,
              onclick: () => move(k, k + 1),
            },
            "↓",
          ),
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
  const order = q.items.slice();
  const move = (from, to) => {
    if (to < 0 || to >= order.length || from === to) return;
    const [it] = order.splice(from, 1);
    order.splice(to, 0, it);
    render(order);
    announce(t("ranking.moved", { label: it.label, k: to + 1 }));
    const [up, down] = list.querySelectorAll("li")[to].querySelectorAll("button");
    const preferred = to > from ? down : up;
    (preferred.disabled ? (preferred === up ? down : up) : preferred).focus();
  };
  render(order);
  const submit = h("button", { type: "button", id: "submit-ranking" }, t("ranking.submit"));
  submit.addEventListener("click", async () => {
    submit.disabled = true;
    try {
      await client.submitRanking(
        order.map((it) => it.id),
        q.items.map((it) => it.id),
      );
      thanks();
    } catch (err) {
      failure(err);
    }
  });
  show(
    h("h2", { id: "question" }, t("ranking.question")),
    h("p", { class: "hint" }, t("ranking.hint")),
    list,
    h("div", { class: "actions" }, submit),
    h("p", { class: "hint" }, t("ranking.randomized")),
  );
  list.querySelector("button:not([disabled])").focus();
}
