"""The ``privrank`` command."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="privrank", description="Privacy-preserving ranking surveys.")
    parser.add_argument("--version", action="version", version=f"privrank {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="apply migrations and run the REST service",
        description="Apply database migrations, create an admin key on first start if "
        "PRIVRANK_ADMIN_KEY is unset (printed once), then serve the API with uvicorn. "
        "DATABASE_URL selects the database (default: SQLite file ./privrank.db).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default %(default)s)")
    serve.add_argument("--no-migrate", action="store_true", help="do not apply migrations first")

    sub.add_parser("migrate", help="apply database migrations (DATABASE_URL) and exit")

    admin_key = sub.add_parser(
        "admin-key",
        help="manage the admin keys kept in the database",
        description="Admin keys kept in DATABASE_URL's database. PRIVRANK_ADMIN_KEY lives in the "
        "environment and is not affected.",
    )
    admin_key_sub = admin_key.add_subparsers(dest="admin_key_command", required=True, metavar="ACTION")
    rotate = admin_key_sub.add_parser(
        "rotate",
        help="mint a new admin key (printed once) and revoke every other database-issued admin key",
        description="Mint a new admin key in the database, print it once (only its hash is stored), and "
        "revoke every other admin key the database holds, in one transaction. Keys of other roles "
        "are kept.",
    )
    rotate.add_argument(
        "--label", help="the new key's label (default: 'minted by privrank admin-key rotate')"
    )

    worker = sub.add_parser(
        "worker",
        help="run queued jobs (PRIVRANK_JOB_QUEUE=rq, REDIS_URL)",
        description="Run the jobs that API instances send to the RQ queue in REDIS_URL's Redis "
        "(PRIVRANK_JOB_QUEUE=rq), on DATABASE_URL's database, one at a time, until stopped "
        "(SIGTERM lets the current job finish). Also queues again the jobs of runners that "
        "stopped heartbeating. Run as many as you like, on any host.",
    )
    worker.add_argument("--burst", action="store_true", help="exit once the queue is empty")

    pl = sub.add_parser(
        "plan",
        help="predict a survey design's accuracy, or the respondents / epsilon it needs",
        description="Simulate the design (balanced pair assignment, randomized response, the debiased MLE "
        "with its default lambda) and report the expected errors and the probability of recovering the "
        "exact top-K, with Monte Carlo standard errors. With --survey: plan from a running survey "
        "(GET /v1/surveys/{id}/plan on --server, with an admin or analyst key from --key or "
        "PRIVRANK_API_KEY): how many more respondents certify the top-K, simulated from the survey's own "
        "design, fit and respondent clustering.",
    )
    pl.add_argument("--survey", help="a running survey's id (with --server): plan from where it stands")
    pl.add_argument("--server", help="the service's base URL, e.g. http://127.0.0.1:8000 (with --survey)")
    pl.add_argument("--key", help="admin or analyst key (default: $PRIVRANK_API_KEY)")
    pl.add_argument("--items", "-m", type=int, help="number of items (not with --survey)")
    pl.add_argument(
        "--respondents",
        "-L",
        type=int,
        help="number of respondents (with --survey: predict for this many more instead of solving)",
    )
    pl.add_argument(
        "--pairs-per-respondent",
        "-p",
        type=int,
        help="pairs each respondent answers (with --survey: each new respondent; default: like the current)",
    )
    pl.add_argument(
        "--epsilon", "-e", type=float, nargs="+", help="epsilon, or several values of a distribution"
    )
    pl.add_argument(
        "--scores", type=float, nargs="+", help="pilot scores taken as the true ones, one per item"
    )
    pl.add_argument(
        "--tau", type=float, help="with --survey: respondent random-effect scale (default: estimated)"
    )
    pl.add_argument("--confidence", type=float, default=0.95, help="with --survey: interval level")
    pl.add_argument(
        "--max-respondents",
        type=int,
        help="with --survey: the most added respondents to try (default 100000)",
    )
    pl.add_argument("--weights", type=float, nargs="+", help="weights of the epsilon values")
    pl.add_argument("--k", "-k", type=int, help="size of the top set (required)")
    pl.add_argument("--spread", type=float, default=2.0, help="true scores ~ Uniform(-spread, spread)")
    pl.add_argument("--gap", type=float, help="evenly spaced true scores with this gap instead")
    pl.add_argument(
        "--replications", "-r", type=int, help="Monte Carlo replicates (default 200; with --survey 100)"
    )
    pl.add_argument("--seed", type=int, default=0)
    pl.add_argument(
        "--solve", choices=["respondents", "epsilon"], help="solve for this instead of predicting"
    )
    pl.add_argument(
        "--target",
        type=float,
        help="target probability of recovering the exact top-K "
        "(with --survey: of certifying it; default 0.8)",
    )
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the progress on stderr (default: when stderr is a terminal)",
    )

    sim = sub.add_parser(
        "simulate",
        help="reproduce the paper's simulation Scenarios I-V (tables and figures)",
        description="Reproduce Scenarios I-V of Xu, Sun & Cheng: one table per scenario on "
        "stdout and one PNG figure per scenario (cf. the paper's Figures 2-6).",
    )
    sim.add_argument(
        "--scenario",
        "-s",
        action="append",
        choices=["I", "II", "III", "IV", "V"],
        help="scenario to run (repeatable; default: all)",
    )
    size = sim.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="10 replicates per cell instead of the paper's 50/100 (seconds)"
    )
    size.add_argument(
        "--replications",
        "-r",
        type=int,
        metavar="N",
        help="replicates per cell (default: the paper's, 50 or 100)",
    )
    sim.add_argument("--seed", type=int, default=20241121, help="master seed (default %(default)s)")
    sim.add_argument(
        "--out",
        type=Path,
        default=Path("simulation-results"),
        help="directory for the PNG figures (default %(default)s)",
    )
    sim.add_argument("--no-figures", action="store_true", help="print tables only")

    site = sub.add_parser(
        "site",
        help="take part in a federated round as a site (rankings never leave this machine)",
        description="A federated site's side of a round opened by an admin (POST /v1/surveys/{id}/rounds). "
        "The credential comes from --token or PRIVRANK_SITE_TOKEN.",
    )
    site_sub = site.add_subparsers(dest="site_command", required=True, metavar="ACTION")
    site_common = argparse.ArgumentParser(add_help=False)
    site_common.add_argument(
        "--server", required=True, help="the service's base URL, e.g. https://rank.example.org"
    )
    site_common.add_argument("--token", help="the site's credential (default: $PRIVRANK_SITE_TOKEN)")
    contrib = site_sub.add_parser(
        "contribute",
        parents=[site_common],
        help="compute, mask and upload this site's message",
        description="Read the local rankings, register this site's X25519 key, wait until every site has "
        "joined, then upload the masked Borda/Lehmer message. Exit status 3: still waiting for other sites "
        "(run again later; the key is kept in the state file). Exit status 4: this site's message was "
        "already computed from a different rankings file or epsilon (recorded in the state file by "
        "SHA-256); the new input was not sent.",
    )
    contrib.add_argument(
        "rankings", type=Path, help="rankings file: PrefLib .soc/.soi, or CSV with a 'ranking' column"
    )
    contrib.add_argument(
        "--format", choices=["soc", "soi", "csv"], help="file format (default: by extension)"
    )
    contrib.add_argument(
        "--state",
        type=Path,
        help="file holding this site's private key (default ./.privrank-site-ROUND-SITE.json)",
    )
    contrib.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="wait this long for other sites to join"
    )
    contrib.add_argument(
        "--epsilon",
        type=float,
        help="also privatize each local ranking with the Mallows mechanism at this epsilon "
        "(epsilon-ranking DP)",
    )
    status = site_sub.add_parser(
        "status", parents=[site_common], help="show this site's round: peers, status and result"
    )
    status.add_argument("--json", action="store_true", help="print the server's raw JSON (GET /v1/site)")

    ex = sub.add_parser(
        "export",
        help="write a survey's data, items and ranking as CSV or Parquet files for pandas and R",
        description="Fetch one survey's releasable data (comparisons.csv or rankings.csv), items and current "
        "ranking from a running service (admin or analyst key: --key or PRIVRANK_API_KEY) into a directory, "
        "with a README.txt naming the columns and how to load them. Existing files are not overwritten "
        "without --force. Exit status 1: the server refused or is unreachable, or files exist; 2: bad "
        "arguments.",
    )
    ex.add_argument("survey", help="the survey's id")
    ex.add_argument("--server", required=True, help="the service's base URL, e.g. http://127.0.0.1:8000")
    ex.add_argument("--key", help="admin or analyst key (default: $PRIVRANK_API_KEY)")
    ex.add_argument(
        "--out",
        type=Path,
        help="directory to write into (default ./privrank-export-SURVEY; created if needed)",
    )
    ex.add_argument(
        "--format",
        choices=["csv", "parquet"],
        default="csv",
        help="file format (default %(default)s; parquet needs the privrank[parquet] extra)",
    )
    ex.add_argument("--force", action="store_true", help="overwrite files a previous export left")
    return parser


def _prepare_database(migrate: bool = True) -> None:
    from ..core.auth import ensure_admin_key
    from ..core.config import get_settings
    from ..core.db.migrate import upgrade
    from ..core.db.session import make_engine, make_session_factory

    settings = get_settings()
    if migrate:
        upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            key = ensure_admin_key(session, settings.admin_key)
    finally:
        engine.dispose()
    if key is not None:
        print(
            "privrank: no PRIVRANK_ADMIN_KEY set, so an admin key was generated. It is shown "
            f"only this once (only its hash is stored):\n\n    {key}\n",
            flush=True,
        )
    _retire_generated_admin_key()


def _retire_generated_admin_key() -> None:
    """With PRIVRANK_ADMIN_KEY configured, revoke the admin key generated on first start
    (one line when one was revoked)."""
    from ..core.config import get_settings
    from ..core.db.session import make_engine, make_session_factory
    from ..keys.service import revoke_generated_admin_keys

    settings = get_settings()
    if not settings.admin_key:
        return
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            revoked = revoke_generated_admin_keys(session, settings.admin_key)
    finally:
        engine.dispose()
    if revoked:
        print(
            "privrank: PRIVRANK_ADMIN_KEY is set, so the admin key generated on first start "
            f"({', '.join(revoked)}) was revoked",
            flush=True,
        )


def _rotate_admin_key(args) -> int:
    """``privrank admin-key rotate``: a new admin key, printed once; the others revoked."""
    from ..core.config import get_settings
    from ..core.db.session import make_engine, make_session_factory
    from ..keys.service import ROTATED_LABEL, rotate_admin_key

    settings = get_settings()
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            key_id, plaintext, revoked = rotate_admin_key(session, args.label or ROTATED_LABEL)
    finally:
        engine.dispose()
    print(
        f"privrank: new admin key {key_id}. It is shown only this once (only its hash is stored):"
        f"\n\n    {plaintext}\n",
        flush=True,
    )
    if revoked:
        print(f"privrank: revoked {len(revoked)} other admin key(s): {', '.join(revoked)}")
    else:
        print("privrank: there was no other admin key in the database to revoke")
    if settings.admin_key:
        print("privrank: PRIVRANK_ADMIN_KEY (environment) is not affected")
    return 0


def _database_unusable(url: str, exc: Exception) -> int:
    """One line naming DATABASE_URL (password hidden) and the driver's reason, instead of
    a traceback, when the database cannot be reached or the URL is malformed."""
    from sqlalchemy.engine import make_url

    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:  # a URL too malformed to parse: say so without echoing it
        shown = "(unparseable)"
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    print(f"privrank: cannot use the database at DATABASE_URL={shown}: {reason}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("migrate", "serve", "admin-key"):
        from sqlalchemy.exc import ArgumentError, OperationalError

        from ..core.config import get_settings

        try:
            if args.command == "admin-key":
                return _rotate_admin_key(args)
            return _migrate() if args.command == "migrate" else _serve(args)
        except (OperationalError, ArgumentError) as exc:
            return _database_unusable(get_settings().database_url, exc)
    if args.command == "worker":
        return _worker(args)
    if args.command == "plan":
        return _plan(args)
    if args.command == "site":
        return _site(args)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "export":
        return _export(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _worker(args) -> int:
    import logging

    from ..core.config import get_settings
    from ..jobs.service import run_worker
    from ..main import LOG_FORMAT

    settings = get_settings()
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    if not settings.redis_url:
        print(
            "privrank: the worker needs REDIS_URL (and API instances PRIVRANK_JOB_QUEUE=rq)", file=sys.stderr
        )
        return 2
    run_worker(settings.redis_url, burst=args.burst)
    return 0


def _migrate() -> int:
    from ..core.config import get_settings
    from ..core.db.migrate import upgrade

    upgrade(get_settings().database_url)
    print("privrank: database is at the latest schema")
    _retire_generated_admin_key()
    return 0


def dashboard_url(host: str, port: int) -> str:
    """The dashboard's address for a server bound to ``host``: on a wildcard (every interface)
    it is reached as localhost on this machine; an IPv6 address is bracketed."""
    if host in ("", "0.0.0.0", "::"):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def _serve(args) -> int:
    import logging

    import uvicorn

    from ..core.config import get_settings
    from ..main import LOG_FORMAT

    logging.basicConfig(level=get_settings().log_level.upper(), format=LOG_FORMAT)
    if get_settings().log_level != "debug":
        # Alembic announces every plugin and step at INFO: quiet unless debugging.
        logging.getLogger("alembic").setLevel(logging.WARNING)
    _prepare_database(migrate=not args.no_migrate)
    print(
        f"privrank: the dashboard is at {dashboard_url(args.host, args.port)}",
        flush=True,
    )
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=get_settings().log_level,
        access_log=get_settings().access_log,
        # Client addresses (rate limits) come from X-Forwarded-For only when the
        # operator names the proxies to trust; uvicorn's own default trusts 127.0.0.1.
        proxy_headers=bool(get_settings().forwarded_allow_ips),
        forwarded_allow_ips=get_settings().forwarded_allow_ips or None,
    )
    return 0


def _simulate(args) -> int:
    from . import simulate

    if args.replications is not None and args.replications < 2:
        print("privrank simulate: --replications must be at least 2", file=sys.stderr)
        return 2
    reps = 10 if args.quick else args.replications
    simulate.run(
        args.scenario or simulate.available(), reps, args.seed, None if args.no_figures else args.out
    )
    return 0


def _site(args) -> int:
    import json
    import os

    from .site import SiteError, contribute

    token = args.token or os.environ.get("PRIVRANK_SITE_TOKEN")
    if not token:
        print(
            "privrank site: give the site's credential with --token or PRIVRANK_SITE_TOKEN", file=sys.stderr
        )
        return 2
    try:
        if args.site_command == "status":
            from .site import SiteClient, status_lines

            view = SiteClient(args.server, token).call("GET", "/v1/site")
            if args.json:
                print(json.dumps(view, indent=2, ensure_ascii=False))
            else:
                print("\n".join(status_lines(view)))
            return 0
        if args.epsilon is not None:
            from ..surveys.policy import MAX_EPSILON, MIN_EPSILON

            if not (0 < args.epsilon < math.inf and MIN_EPSILON <= args.epsilon <= MAX_EPSILON):
                print(
                    f"privrank site: --epsilon must be a positive finite number in [{MIN_EPSILON:g}, "
                    f"{MAX_EPSILON:g}] (the bounds of a survey's epsilon; the server refuses others)",
                    file=sys.stderr,
                )
                return 2
        return contribute(
            args.server, token, args.rankings, args.format, args.state, args.wait, epsilon=args.epsilon
        )
    except SiteError as exc:
        print(f"privrank site: {exc}", file=sys.stderr)
        return 1


def _export(args) -> int:
    import os

    from .exporter import ExportError, export_survey

    key = args.key or os.environ.get("PRIVRANK_API_KEY")
    if not key:
        print("privrank export: give an admin or analyst key (--key or PRIVRANK_API_KEY)", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else Path(f"privrank-export-{args.survey}")
    try:
        written = export_survey(args.server, key, args.survey, out, args.format, args.force)
    except ExportError as exc:
        print(f"privrank export: {exc}", file=sys.stderr)
        return exc.status
    except OSError as exc:
        print(f"privrank export: cannot write into {out}: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


def _plan(args) -> int:
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


def run() -> int:
    """Console-script entry point: like :func:`main`, quiet when stdout closes early."""
    try:
        return main()
    except BrokenPipeError:  # e.g. `privrank simulate | head`
        sys.stderr.close()
        return 0
