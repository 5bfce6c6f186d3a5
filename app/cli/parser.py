"""The command line of ``privrank``: every command, its options and help texts.

The command reference (docs/reference/cli.md) is generated from :func:`build_parser`;
:func:`app.cli.main` runs what it parses.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["build_parser"]


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
