/**
 * The dashboard's shared state: its main element, the API key (kept in sessionStorage,
 * sent only as an Authorization header, never in a URL), the signed-in role, and the
 * hook through which any view re-renders the view the URL names (dashboard.js sets it).
 */

const KEY = "privrank.key";

/** The dashboard's <main>: every view replaces its content. */
export const app = document.getElementById("app");

export const session = {
  /** "admin", "analyst" or "moderator" once signed in, else null. */
  role: null,
  /** Renders the view the URL's hash names; set by dashboard.js (the router). */
  route: async () => {},
};

export const storedKey = () => sessionStorage.getItem(KEY);

export function storeKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}
