/**
 * What the respondent page's views share: its main element, this survey's client
 * (privrank.js) with the respondent token kept in sessionStorage, and the progress so far.
 */
import { PrivrankClient } from "/static/privrank.js";

/** The page's <main>: each view replaces its content. */
export const main = document.getElementById("survey");
const surveyId = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
/** The page's query: ?n=N asks for N pairs. */
export const params = new URLSearchParams(location.search);
export const tokenKey = `privrank.respondent.${surveyId}`;
/** The client; its `lang` starts as the page's ?lang= and becomes the language the service chose. */
export const client = new PrivrankClient({
  surveyId,
  token: sessionStorage.getItem(tokenKey),
  lang: params.get("lang"),
});

export const state = {
  /** The survey's public description (client.survey(); set by start()). */
  survey: null,
  answered: 0,
  target: 10,
  skipped: new Set(),
  serial: 0, // counts the pairs shown (data-serial, for tests and assistive tech)
  /** A message for the next view to show once (after reporting an item), else null. */
  notice: null,
  /** Starts (or restarts) the page: set by respond.js. */
  start: async () => {},
};

/** Replaces the page's content by `children` (null ones left out). */
export function show(...children) {
  main.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

export const central = () => state.survey.privacy_model === "central";
