/**
 * privrank.js — a small client library for privrank survey frontends.
 *
 * Served by the service at /static/privrank.js as an ES module:
 *
 *   import { PrivrankClient } from "/static/privrank.js";
 *   const client = new PrivrankClient({ surveyId: "srv_…" });
 *   await client.register({ epsilon: 1.5 });         // the respondent's own ε
 *   const [pair] = await client.pairs(1);             // {a, b, a_label, b_label}
 *   await client.answer([{ a: pair.a, b: pair.b, winner: pair.a }]);
 *
 * Privacy: answers are randomized HERE, in the browser, before anything is sent.
 * A pairwise answer is reported flipped with probability 1/(1+e^ε) (randomized
 * response, ε-local differential privacy per comparison); a ranking is replaced by
 * a synthetic one from the Mallows mechanism with weight ε/(m−1) per pair
 * (ε-ranking DP). Requests carry `privatized: true` and the ε used, so the true
 * answer never leaves the device. All randomness comes from
 * `crypto.getRandomValues` (never `Math.random`). Nothing here logs an answer.
 *
 * Network: every submission carries an Idempotency-Key, so the library retries
 * network failures and 5xx answers (with backoff) without ever storing an answer
 * twice; 4xx answers are raised as `PrivrankError` with the server's message.
 */

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
 * after V^(t) of the items already placed, V^(t) a truncated geometric drawn by
 * inverting its CDF with expm1/log1p (stable for every ε; ε = ∞ keeps the order).
 */
export function mallowsPrivatize(order, epsilon) {
  if (!(epsilon > 0)) throw new RangeError("epsilon must be > 0");
  const m = order.length;
  if (m < 2) return order.slice();
  const b = epsilon / (m - 1);
  const out = [order[0]];
  for (let t = 2; t <= m; t++) {
    let j = 0; // discordant pairs the new item creates: P(J = j) ∝ e^{−bj}, j = 0..t−1
    if (b !== Infinity) {
      j = Math.floor(-Math.log1p(uniform() * Math.expm1(-b * t)) / b);
      j = Math.min(t - 1, Math.max(0, j));
    }
    out.splice(t - 1 - j, 0, order[t - 1]);
  }
  return out;
}

// -- the HTTP client ---------------------------------------------------------------------

export class PrivrankError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.name = "PrivrankError";
    this.status = status;
    this.detail = detail;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class PrivrankClient {
  /**
   * @param {object} options
   * @param {string} options.surveyId  the survey's id (srv_…)
   * @param {string} [options.baseUrl] the service's origin ("" = this page's)
   * @param {string} [options.token]   a respondent token from an earlier register()
   * @param {number} [options.retries] attempts after the first on network errors and 5xx (default 4)
   */
  constructor({ surveyId, baseUrl = "", token = null, retries = 4, fetchImpl = globalThis.fetch.bind(globalThis) }) {
    if (!surveyId) throw new Error("surveyId is required");
    this.surveyId = surveyId;
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.token = token;
    this.epsilon = null;
    this.retries = retries;
    this.fetch = fetchImpl;
  }

  async request(method, path, body, { idempotencyKey = null, auth = true } = {}) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (auth && this.token) headers.Authorization = `Bearer ${this.token}`;
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
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
        if (attempt >= this.retries) throw err;
        await sleep(delay + randomInt(250));
        delay *= 2;
        continue;
      }
      if (response.status >= 500 && attempt < this.retries && (idempotencyKey || method === "GET")) {
        await sleep(delay + randomInt(250));
        delay *= 2;
        continue;
      }
      const data = await response.json().catch(() => ({}));
      if (!response.ok) throw new PrivrankError(response.status, data.detail ?? response.statusText);
      return data;
    }
  }

  base() {
    return `/v1/surveys/${encodeURIComponent(this.surveyId)}`;
  }

  /** Public facts of the survey: title, kind, status and its privacy bounds. */
  survey() {
    return this.request("GET", `${this.base()}/public`, undefined, { auth: false });
  }

  /** Register as a respondent (optionally with an ε within the survey's bounds). */
  async register({ epsilon } = {}) {
    const data = await this.request(
      "POST",
      `${this.base()}/respondents`,
      epsilon === undefined || epsilon === null ? {} : { epsilon },
      { auth: false, idempotencyKey: null },
    );
    this.token = data.token;
    this.epsilon = data.epsilon;
    return data;
  }

  /** Pairs this respondent has not answered yet (pairwise surveys). */
  async pairs(count = 1) {
    return (await this.request("GET", `${this.base()}/pairs?count=${count}`)).pairs;
  }

  /** The items to rank, in a fresh random order (ranking surveys). */
  question() {
    return this.request("GET", `${this.base()}/question`);
  }

  /** The respondent's own account: comparisons, ε spent, budget left. */
  me() {
    return this.request("GET", `${this.base()}/respondents/me`);
  }

  /**
   * Randomize each comparison on this device and post them with privatized: true.
   * `comparisons`: [{a, b, winner}] with the TRUE winners; only randomized ones leave.
   * Central-model surveys (a trusted operator stores true answers and publishes only
   * differentially private releases) take the true answers: pass `{ central: true }`.
   */
  answer(comparisons, { epsilon = this.epsilon, central = false } = {}) {
    if (central) {
      return this.request(
        "POST",
        `${this.base()}/responses`,
        { privatized: false, comparisons },
        { idempotencyKey: crypto.randomUUID() },
      );
    }
    if (!(epsilon > 0)) throw new Error("register() first, or pass the epsilon to use");
    const reported = comparisons.map((c) => randomizeComparison(c, epsilon));
    return this.request(
      "POST",
      `${this.base()}/responses`,
      { privatized: true, epsilon, comparisons: reported },
      { idempotencyKey: crypto.randomUUID() },
    );
  }

  /**
   * Complete a (possibly partial) ranking with `allItems`, privatize it with the
   * Mallows mechanism on this device, and post the synthetic ranking.
   */
  submitRanking(ranking, allItems, { epsilon = this.epsilon } = {}) {
    if (!(epsilon > 0)) throw new Error("register() first, or pass the epsilon to use");
    const synthetic = mallowsPrivatize(completeRanking(ranking, allItems), epsilon);
    return this.request(
      "POST",
      `${this.base()}/responses`,
      { privatized: true, epsilon, ranking: synthetic },
      { idempotencyKey: crypto.randomUUID() },
    );
  }
}
