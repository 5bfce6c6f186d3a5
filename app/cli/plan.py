"""``privrank plan``: a design's accuracy simulated here, or a running survey's plan.

Without ``--survey`` the simulation runs in this process (:func:`app.planning.service.run_plan`);
with it, the server is asked (GET /v1/surveys/{id}/plan), and a long plan is followed as
a job. Progress goes to stderr (docs/how-to/plan.md).
"""

from __future__ import annotations

import math
import sys

__all__ = ["plan_command"]


def plan_command(args) -> int:
    """``privrank plan``: the design simulated here, or with ``--survey`` the server's plan."""
    import json

    from ..core.errors import Invalid
    from ..planning.service import run_plan

    if args.survey is not None or args.server is not None:
        return _plan_survey(args)
    missing = [f"--{n}" for n in ("items", "pairs_per_respondent", "k") if getattr(args, n) is None]
    if missing:
        print(f"privrank plan: {', '.join(m.replace('_', '-') for m in missing)} required", file=sys.stderr)
        return 2
    from ..jobs.cost import PLAN_SEARCH_STEPS
    from ..jobs.execution import JobDeadline

    replications = args.replications or 200
    expected = replications * (PLAN_SEARCH_STEPS if (args.solve or "none") != "none" else 1)
    deadline = JobDeadline(math.inf, expected, what="the plan")
    try:
        with _Progress(_show_progress(args), lambda: deadline.progress, "simulating"):
            out = run_plan(
                args.items,
                args.respondents,
                args.pairs_per_respondent,
                args.epsilon,
                args.k,
                args.weights,
                args.spread,
                args.gap,
                replications,
                args.seed,
                args.solve or "none",
                args.target,
                args.scores,
                deadline=deadline,
            )
    except Invalid as exc:
        print(f"privrank plan: {exc.detail}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out.model_dump(mode="json"), indent=2))
        return 0
    p = out.plan
    eps = ", ".join(f"{e:g} (weight {w:.2f})" for e, w in zip(p.epsilon, p.epsilon_weights, strict=True))
    if out.solve != "none":
        what = "respondents" if out.solve == "respondents" else "epsilon"
        if out.reached:
            print(f"{what} needed for P(exact top-{p.k}) >= {out.target:g}: {out.solution:.4g}")
        else:
            print(f"target P(exact top-{p.k}) >= {out.target:g} not reached within the search range")
    print(
        f"design: {p.n_items} items, {p.n_respondents} respondents x {p.pairs_per_respondent} pairs "
        f"({p.comparisons_per_pair:.1f} comparisons per pair), epsilon {eps}"
    )
    print(f"scores: {p.scores}; {p.replications} simulated surveys")
    for key, label in (
        ("linf_error", "expected max score error |theta_hat - theta|_inf"),
        ("l2_error", "expected RMS score error"),
        ("kendall_error", "expected Kendall error (pairs misordered)"),
        ("p_exact_top_k", f"P(exact top-{p.k} recovered)"),
    ):
        print(f"  {label:48s} {getattr(p, key).mean:.4f} +/- {getattr(p, key).se:.4f}")
    totals = ", ".join(f"{t:g}" for t in p.respondent_epsilon_total)
    print(f"each respondent's total epsilon (composition over its pairs): {totals}")
    print(
        f"G(eps) = {p.G:.3g}; "
        f"dividing line 1/sqrt(items x comparisons per pair) = {p.dividing_line_epsilon:.3g}"
    )
    return 0


def _show_progress(args) -> bool:
    return args.progress if args.progress is not None else sys.stderr.isatty()


class _Progress:
    """``what… 42%`` on stderr, redrawn every half second while the block runs (when
    ``shown``); the line is cleared at the end."""

    def __init__(self, shown: bool, fraction, what: str) -> None:
        import threading

        self.shown, self.fraction, self.what = shown, fraction, what
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _draw(self) -> None:
        print(f"\r{self.what}… {100 * self.fraction():3.0f}%", end="", file=sys.stderr, flush=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._draw()

    def __enter__(self) -> _Progress:
        if self.shown:
            self._draw()
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.shown:
            self._stop.set()
            self._thread.join()
            print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)


def _follow_job(get, delete, server: str, job: dict, shown: bool) -> dict | None:
    """Poll a job (GET /v1/jobs/{id}) until it ends, showing its progress; its result,
    or None (the reason printed) when it failed or was cancelled. Ctrl-C cancels the
    job on the server before exiting."""
    import time

    state = {"progress": job["progress"]}
    if shown:
        print(f"the server runs this as job {job['id']}", file=sys.stderr)
    started = time.monotonic()
    try:
        with _Progress(shown, lambda: state["progress"], "simulating"):
            while job["status"] not in ("done", "failed", "cancelled"):
                time.sleep(0.5 if time.monotonic() - started < 10 else 2.0)
                _, job = get(f"{server}/v1/jobs/{job['id']}")
                state["progress"] = job["progress"]
    except KeyboardInterrupt:
        delete(f"{server}/v1/jobs/{job['id']}")
        print(f"privrank plan: cancelled job {job['id']}", file=sys.stderr)
        return None
    if job["status"] != "done":
        print(
            f"privrank plan: job {job['id']} {job['status']}: {job.get('error') or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return None
    return job["result"]


def _plan_survey(args) -> int:
    """``privrank plan --survey SID --server URL``: GET /v1/surveys/{SID}/plan, printed."""
    import contextlib
    import json
    import os
    import urllib.error
    import urllib.parse
    import urllib.request

    from ..core.keyed_http import RedirectRefused, open_keyed

    if not args.survey or not args.server:
        print("privrank plan: --survey and --server go together", file=sys.stderr)
        return 2
    if not args.server.startswith(("http://", "https://")):
        print("privrank plan: --server must be an http:// or https:// URL", file=sys.stderr)
        return 2
    key = args.key or os.environ.get("PRIVRANK_API_KEY")
    if not key:
        print("privrank plan: give an admin or analyst key (--key or PRIVRANK_API_KEY)", file=sys.stderr)
        return 2
    if args.items is not None or args.solve is not None or args.weights is not None:
        print("privrank plan: --items, --solve and --weights are not used with --survey", file=sys.stderr)
        return 2
    if args.epsilon is not None and len(args.epsilon) != 1:
        print("privrank plan: with --survey, --epsilon takes one value", file=sys.stderr)
        return 2
    query = {"k": args.k, "confidence": args.confidence, "seed": args.seed}
    optional = {
        "target": args.target,
        "respondents": args.respondents,
        "tau": args.tau,
        "pairs_per_respondent": args.pairs_per_respondent,
        "epsilon": None if args.epsilon is None else args.epsilon[0],
        "replications": args.replications,
        "scores": None if args.scores is None else ",".join(repr(x) for x in args.scores),
        "max_respondents": args.max_respondents,
    }
    query.update({k: v for k, v in optional.items() if v is not None})
    if args.k is None:
        print("privrank plan: --k required", file=sys.stderr)
        return 2
    url = (
        f"{args.server.rstrip('/')}/v1/surveys/{urllib.parse.quote(args.survey, safe='')}/plan?"
        + urllib.parse.urlencode(query)
    )

    def get(target: str, method: str = "GET") -> tuple[int, dict]:
        request = urllib.request.Request(target, headers={"Authorization": f"Bearer {key}"}, method=method)
        with open_keyed(request, timeout=600) as response:
            return response.status, json.load(response)

    def delete(target: str) -> None:
        # Finished meanwhile (409), or the server is gone: nothing left to cancel.
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            get(target, "DELETE")

    try:
        status, out = get(url)
        if status == 202:  # handed to a job (long): follow it
            result = _follow_job(get, delete, args.server.rstrip("/"), out, _show_progress(args))
            if result is None:
                return 1
            out = result
    except urllib.error.HTTPError as exc:
        try:
            detail = json.load(exc).get("detail")
        except (ValueError, AttributeError):
            detail = exc.reason
        print(f"privrank plan: the server answered {exc.code}: {detail}", file=sys.stderr)
        return 1
    except RedirectRefused as exc:
        print(f"privrank plan: {exc.reason} as --server", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"privrank plan: cannot reach {args.server}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    p = out["plan"]
    k = p["k"]
    if out["target"] is None:
        print(f"with {p['added_respondents']} more respondents:")
    elif out["reached"]:
        print(f"respondents to add for P(top-{k} certified) >= {out['target']:g}: {out['solution']}")
    else:
        why = (
            "the work one request may do"
            if out["search_limit"] == "work"
            else f"{p['added_respondents']} more respondents (raise --max-respondents)"
        )
        print(f"P(top-{k} certified) >= {out['target']:g} not reached within {why}")
    print(
        f"survey now: {p['current_respondents']} respondents, {p['current_comparisons']} comparisons; "
        f"{p['n_items']} items; {p['replications']} simulated surveys"
    )
    for key_, label in (
        ("p_certified", f"P(top-{k} certified by the {100 * p['level']:g}% intervals)"),
        ("p_certified_correct", "P(certified and the true top set)"),
        ("p_exact_top_k", f"P(estimated top-{k} exactly right)"),
        ("certified_items", f"top-{k} items certified (expected)"),
        ("p_refused", "P(intervals refused)"),
    ):
        print(f"  {label:48s} {p[key_]['mean']:.4f} +/- {p[key_]['se']:.4f}")
    if out["tau_interval"] is not None:
        lo, hi = out["tau_interval"]
        print(
            f"respondent random effects: tau = {out['tau']:.3g} "
            f"({out['tau_source']}; interval {lo:.3g}-{hi:.3g})"
        )
    print(f"assumption: {p['assumption']}")
    return 0
