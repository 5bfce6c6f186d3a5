/**
 * privrank.js — a small client library for privrank survey frontends.
 *
 * Served by the service at /static/privrank.js as an ES module:
 *
 *   import { PrivrankClient } from "/static/privrank.js";
 *   const client = new PrivrankClient({ surveyId: "srv_…" });
 *   await client.register({ epsilon: 1.5 });         // the respondent's own ε
 *   const [pair] = await client.pairs(1);             // {a, b, a_label, b_label, ticket}
 *   await client.answer([{ a: pair.a, b: pair.b, winner: pair.a, ticket: pair.ticket }]);
 *
 * Privacy: answers are randomized HERE, in the browser, before anything is sent.
 * A pairwise answer is reported flipped with probability 1/(1+e^ε) (randomized
 * response, ε-local differential privacy per comparison); a ranking is replaced by
 * a synthetic one from the Mallows mechanism with weight ε/(m−1) per pair
 * (ε-ranking DP). Requests carry `privatized: true` and the ε used, so the true
 * answer never leaves the device. All randomness comes from
 * `crypto.getRandomValues` (never `Math.random`). Nothing here logs an answer.
 *
 * Each true answer is randomized ONCE ("permanent randomized response"): the
 * report is remembered (in sessionStorage when available, else in memory) with
 * the Idempotency-Key of its submission, and any resubmission of the same pair or
 * ranking — a retry, a "try again", a reload — sends exactly that report again.
 * Fresh randomizations of one answer would let whoever saw them vote the noise
 * away.
 *
 * Network: submissions carry an Idempotency-Key, so the library retries network
 * failures and 5xx answers (with backoff) without ever storing an answer twice; a
 * 429 is retried after its Retry-After when that is at most a minute (a longer wait,
 * an hourly limit's, is raised as `PrivrankError` at once); requests without a key (registration) are
 * not retried after a network failure (the first one may have arrived); other 4xx
 * answers are raised as `PrivrankError` with the server's message.
 */

/** The longest Retry-After (seconds) a request waits out before trying again. */
const MAX_RETRY_WAIT = 60;

// -- randomness -----------------------------------------------------------------

/** A uniform draw on [0, 1) with 53 random bits from crypto.getRandomValues. */
export function uniform() {
  const w = new Uint32Array(2);
  crypto.getRandomValues(w);
  return ((w[0] >>> 5) * 67108864 + (w[1] >>> 6)) / 9007199254740992;
}

/** A uniform integer in 0..n-1 (rejection sampling: exactly uniform). */
export function randomInt(n) {
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 32) throw new RangeError("n must be an integer in 1..2^32");
  const limit = Math.floor(2 ** 32 / n) * n;
  const w = new Uint32Array(1);
  for (;;) {
    crypto.getRandomValues(w);
    if (w[0] < limit) return w[0] % n;
  }
}

/** A uniformly shuffled copy of `items` (Fisher–Yates on randomInt). */
export function shuffle(items) {
  const out = items.slice();
  for (let k = out.length - 1; k > 0; k--) {
    const r = randomInt(k + 1);
    [out[k], out[r]] = [out[r], out[k]];
  }
  return out;
}

/** A random 128-bit key as hex (crypto.randomUUID needs a secure context; this does not). */
export function randomKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// -- mechanisms ---------------------------------------------------------------------

/** Flip probability of randomized response, 1/(1+e^ε) (0 at ε = ∞). */
export function flipProbability(epsilon) {
  if (!(epsilon > 0)) throw new RangeError("epsilon must be > 0");
  const t = Math.exp(-epsilon);
  return t / (1 + t);
}

/** Probability that one reported answer is the true one, e^ε/(1+e^ε). */
export function truthProbability(epsilon) {
  return 1 - flipProbability(epsilon);
}

/**
 * Randomized response on one comparison: returns the reported winner, which is
 * the true `winner` with probability e^ε/(1+e^ε) and the other item otherwise.
 */
export function randomizeComparison({ a, b, winner }, epsilon) {
  if (winner !== a && winner !== b) throw new Error("winner must be a or b");
  const loser = winner === a ? b : a;
  return { a, b, winner: uniform() < flipProbability(epsilon) ? loser : winner };
}

/**
 * Complete a top-k list: the items of `allItems` not in `partial` go below it in
 * uniformly random order.
 */
export function completeRanking(partial, allItems) {
  const seen = new Set(partial);
  if (seen.size !== partial.length) throw new Error("an item is ranked twice");
  for (const x of partial) if (!allItems.includes(x)) throw new Error("unknown item in the ranking");
  return partial.concat(shuffle(allItems.filter((x) => !seen.has(x))));
}

/**
 * The Mallows mechanism (Algorithm 1 of "Ranking Differential Privacy" as the
 * repeated-insertion model): returns a synthetic ordering distributed as
 * P(σ̃) ∝ exp(−b·d_K(order, σ̃)), b = ε/(m−1). Stage t inserts the t-th best item
 * after V^(t) of the items already placed, P(V^(t) = k) ∝ e^{bk}, k = 0..t−1. The same
 * algorithm as the server's (app/stats/rankings.py, docs/mechanisms.md §3.2,
 * "Sampling"): V = U₁ + U₂·2⁻⁵³ from two uniforms, exact to a relative rounding near
 * 0, and V^(t) ≥ k ⇔ V > expm1(bk)/expm1(bt), i.e. V^(t) = ⌈log1p(V·expm1(bt))/b⌉ − 1:
 * the rarest outcome is the event next to V = 0, so every outcome gets its exact share.
 * b = ∞ keeps the order; b = 0 is uniform.
 */
export function mallowsPrivatize(order, epsilon) {
  if (!(epsilon > 0)) throw new RangeError("epsilon must be > 0");
  const m = order.length;
  if (m < 2) return order.slice();
  const b = epsilon / (m - 1);
  const out = [order[0]];
  for (let t = 2; t <= m; t++) {
    const v = uniform() + uniform() * 2 ** -53; // V on [0, 1], resolution 2⁻¹⁰⁶ near 0
    let k = t - 1; // concordant pairs the new item forms with the items placed (b = ∞: all)
    if (b === 0) k = Math.ceil(v * t) - 1;
    else if (b * t <= 700) k = Math.ceil(Math.log1p(v * Math.expm1(b * t)) / b) - 1;
    else if (b !== Infinity) {
      // expm1(bt) would overflow: the same function, t − 1 − ⌊−log(e^{−bt} + V·(1 − e^{−bt}))/b⌋.
      k = t - 1 - Math.floor(-Math.log(Math.exp(-b * t) - v * Math.expm1(-b * t)) / b);
    }
    k = Math.min(t - 1, Math.max(0, k));
    out.splice(k, 0, order[t - 1]);
  }
  return out;
}

// -- the HTTP client ---------------------------------------------------------------------

export class PrivrankError extends Error {
  constructor(status, detail, code = null) {
    super(PrivrankError.describe(detail));
    this.name = "PrivrankError";
    this.status = status;
    this.detail = detail;
    /** The server's machine-readable reason when it gives one (e.g. "suggestion_limit"), else null. */
    this.code =
      code ?? (detail && typeof detail === "object" && !Array.isArray(detail) ? detail.code : null) ?? null;
  }

  /** A readable message from the server's `detail` (a string, or a list of field errors). */
  static describe(detail) {
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail
        .map(
          (e) =>
            `${(e.loc || []).filter((x) => x !== "body" && x !== "query").join(".") || "request"}: ${e.msg}`,
        )
        .join("; ");
    }
    return JSON.stringify(detail);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Where reports are remembered: sessionStorage when the page has it, else memory. */
function defaultStore() {
  try {
    const probe = "privrank.probe";
    globalThis.sessionStorage.setItem(probe, "1");
    globalThis.sessionStorage.removeItem(probe);
    return globalThis.sessionStorage;
  } catch {
    const mem = new Map();
    return {
      getItem: (k) => mem.get(k) ?? null,
      setItem: (k, v) => mem.set(k, String(v)),
      removeItem: (k) => mem.delete(k),
    };
  }
}

export class PrivrankClient {
  /**
   * @param {object} options
   * @param {string} options.surveyId  the survey's id (srv_…)
   * @param {string} [options.baseUrl] the service's origin ("" = this page's)
   * @param {string} [options.token]   a respondent token from an earlier register()
   * @param {number} [options.retries] attempts after the first on network errors, 429 and 5xx (default 4)
   * @param {Storage} [options.store]  where reports are remembered (default: sessionStorage, else memory)
   * @param {string} [options.lang]    the language of the labels ("es", …; default: the service decides
   *                                   from Accept-Language, then the survey's default language)
   */
  constructor({
    surveyId,
    baseUrl = "",
    token = null,
    retries = 4,
    fetchImpl = globalThis.fetch.bind(globalThis),
    store = defaultStore(),
    lang = null,
  }) {
    if (!surveyId) throw new Error("surveyId is required");
    this.surveyId = surveyId;
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.token = token;
    this.epsilon = null;
    this.retries = retries;
    this.fetch = fetchImpl;
    this.store = store;
    this.lang = lang;
  }

  /** `path` with this client's ?lang= (when it has one): labels in that language. */
  withLang(path) {
    if (!this.lang) return path;
    return `${path}${path.includes("?") ? "&" : "?"}lang=${encodeURIComponent(this.lang)}`;
  }

  async request(method, path, body, { idempotencyKey = null, auth = true } = {}) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (auth && this.token) headers.Authorization = `Bearer ${this.token}`;
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    const safe = Boolean(idempotencyKey) || method === "GET";
    let delay = 500;
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.fetch(this.baseUrl + path, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (err) {
        // The request may have arrived: only what is safe to repeat is repeated.
        if (!safe || attempt >= this.retries) throw err;
        await sleep(delay + randomInt(250));
        delay *= 2;
        continue;
      }
      if (response.status === 429 && attempt < this.retries) {
        const wait = Number(response.headers.get("Retry-After")) || 1;
        // A wait of minutes (an hourly limit) is not sat out with the page held: raised.
        if (wait <= MAX_RETRY_WAIT) {
          await sleep(1000 * wait + randomInt(250));
          continue;
        }
      }
      if (response.status >= 500 && safe && attempt < this.retries) {
        await sleep(delay + randomInt(250));
        delay *= 2;
        continue;
      }
      const data = await response.json().catch(() => ({}));
      if (!response.ok)
        throw new PrivrankError(response.status, data.detail ?? response.statusText, data.code);
      return data;
    }
  }

  base() {
    return `/v1/surveys/${encodeURIComponent(this.surveyId)}`;
  }

  /** Storage key for this respondent's remembered reports. */
  memoKey(what) {
    return `privrank.report.${this.surveyId}.${(this.token || "").split(".")[0]}.${what}`;
  }

  remembered(what) {
    const raw = this.store.getItem(this.memoKey(what));
    return raw ? JSON.parse(raw) : null;
  }

  remember(what, value) {
    this.store.setItem(this.memoKey(what), JSON.stringify(value));
  }

  /** Public facts of the survey: title, kind, status and its privacy bounds. */
  survey() {
    return this.request("GET", this.withLang(`${this.base()}/public`), undefined, { auth: false });
  }

  /** Register as a respondent (optionally with an ε within the survey's bounds). */
  async register({ epsilon } = {}) {
    const data = await this.request(
      "POST",
      `${this.base()}/respondents`,
      epsilon === undefined || epsilon === null ? {} : { epsilon },
      { auth: false },
    );
    this.token = data.token;
    this.epsilon = data.epsilon;
    return data;
  }

  /** Pairs this respondent has not answered yet (pairwise surveys). */
  async pairs(count = 1) {
    return (await this.request("GET", this.withLang(`${this.base()}/pairs?count=${count}`))).pairs;
  }

  /** The items to rank, in a fresh random order (ranking surveys). */
  question() {
    return this.request("GET", this.withLang(`${this.base()}/question`));
  }

  /** The respondent's own account: comparisons, ε spent, budget left (also sets this.epsilon). */
  async me() {
    const data = await this.request("GET", `${this.base()}/respondents/me`);
    if (data.epsilon !== null && data.epsilon !== undefined) this.epsilon = data.epsilon;
    return data;
  }

  /**
   * "Can't decide" on a pair served (`ticket`: the pair's `undecided_ticket`): the
   * survey's count goes up by one, once per pair served to this respondent. The request
   * names no pair, and nothing about it or this respondent is stored; no ε is spent.
   */
  async undecided(ticket) {
    await this.request("POST", `${this.base()}/undecided`, { ticket });
  }

  /**
   * Suggest a new item ("Suggest an idea"). The label goes to the survey's moderators
   * (surveys with suggestions enabled); it is stored without any link to this
   * respondent or their answers. Resolves to {received: true, remaining}: how many
   * more this respondent may suggest. A 409 with `code` "suggestion_limit" means all
   * are used.
   */
  suggest(label) {
    return this.request("POST", `${this.base()}/suggestions`, { label });
  }

  /**
   * Report ("flag") an item of a pair shown as offensive, off topic or a duplicate.
   * Repeats by the same respondent count once; an item reaching the survey's threshold
   * goes to its moderators and is not shown until they decide.
   */
  async flag(itemId) {
    await this.request("POST", `${this.base()}/items/${encodeURIComponent(itemId)}/flag`);
  }

  /** The survey's current results, when it publishes them (no credentials; 404 otherwise). */
  results() {
    return this.request("GET", this.withLang(`${this.base()}/results`), undefined, { auth: false });
  }

  /**
   * Randomize each comparison on this device and post them with privatized: true.
   * `comparisons`: [{a, b, winner}] with the TRUE winners; only randomized ones leave.
   * Pass each pair's `ticket` from `pairs()` along (goal surveys count only ticketed answers).
   * A pair answered before (even if that submission failed) is sent with its first
   * report, under the first submission's key. Central-model surveys (a trusted
   * operator stores true answers and publishes only differentially private
   * releases) take the true answers: pass `{ central: true }`.
   */
  async answer(comparisons, { epsilon = this.epsilon, central = false } = {}) {
    if (central) {
      return this.request(
        "POST",
        `${this.base()}/responses`,
        { privatized: false, comparisons },
        { idempotencyKey: randomKey() },
      );
    }
    if (!(epsilon > 0)) throw new Error("register() first, or pass the epsilon to use");
    const reported = comparisons.map((c) => {
      // One orientation per pair, so that a resubmission is byte-for-byte the same.
      const [a, b] = [c.a, c.b].sort();
      const pair = `${a}|${b}`;
      // A goal survey's ticket goes back with its pair (it never depends on the answer).
      const ticket = c.ticket ? { ticket: c.ticket } : {};
      const earlier = this.remembered(`pair.${pair}`);
      if (earlier && earlier.epsilon === epsilon) return { a, b, winner: earlier.winner, ...ticket };
      const report = randomizeComparison({ a, b, winner: c.winner }, epsilon);
      this.remember(`pair.${pair}`, { winner: report.winner, epsilon });
      return { ...report, ...ticket };
    });
    const signature = reported
      .map((c) => [c.a, c.b].sort().join("|"))
      .sort()
      .join(",");
    const keyName = `key.${signature}`;
    const key = this.remembered(keyName) ?? randomKey();
    this.remember(keyName, key);
    return this.request(
      "POST",
      `${this.base()}/responses`,
      { privatized: true, epsilon, comparisons: reported },
      { idempotencyKey: key },
    );
  }

  /**
   * Complete a (possibly partial) ranking with `allItems`, privatize it with the
   * Mallows mechanism on this device, and post the synthetic ranking. The synthetic
   * ranking is drawn once per respondent and resent as it is on any resubmission.
   */
  async submitRanking(ranking, allItems, { epsilon = this.epsilon } = {}) {
    if (!(epsilon > 0)) throw new Error("register() first, or pass the epsilon to use");
    let memo = this.remembered("ranking");
    if (!memo || memo.epsilon !== epsilon) {
      memo = {
        synthetic: mallowsPrivatize(completeRanking(ranking, allItems), epsilon),
        epsilon,
        key: randomKey(),
      };
      this.remember("ranking", memo);
    }
    return this.request(
      "POST",
      `${this.base()}/responses`,
      { privatized: true, epsilon, ranking: memo.synthetic },
      { idempotencyKey: memo.key },
    );
  }
}
