"""deploy/: the compose file and the Caddyfile hold together, and with the service.

No Docker engine runs where this suite runs, so the deployment is not started here:
this checks what can go wrong without one — a service missing, migrations run by
more than one container, an instance that would not trust the proxy (or would trust
anyone), a setting the service does not know, a command the CLI does not have. The
topology itself (two instances and a worker on one PostgreSQL and one Redis) runs in
tests/postgres/test_instances.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from app.cli import build_parser
from app.core.config import Settings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_the_services_are_all_there(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "migrate", "api1", "api2", "worker", "proxy"}
    for name in ("postgres", "redis", "api1", "api2"):
        assert services[name]["healthcheck"]["test"], name  # checked, so dependants wait for it
    assert services["redis"]["command"][:3] == ["redis-server", "--appendonly", "yes"]  # the queue survives


def test_migrations_run_once_before_any_instance(compose):
    services = compose["services"]
    commands = {name: s.get("command") for name, s in services.items()}
    assert commands["migrate"] == ["privrank", "migrate"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api1", "api2", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    for name in ("api1", "api2"):
        assert commands[name][:3] == ["privrank", "serve", "--no-migrate"]
    assert commands["worker"] == ["privrank", "worker"]
    # Every command is one the CLI has, with arguments it accepts.
    parser = build_parser()
    for name in ("migrate", "api1", "api2", "worker"):
        parser.parse_args(commands[name][1:])


def test_the_instances_share_one_configuration_the_service_understands(compose):
    services = compose["services"]
    known = {f.validation_alias for f in Settings.model_fields.values()}
    envs = [services[name]["environment"] for name in ("migrate", "api1", "api2", "worker")]
    assert all(env == envs[0] for env in envs)
    env = envs[0]
    assert set(env) <= known, set(env) - known
    assert env["PRIVRANK_JOB_QUEUE"] == "rq" and env["REDIS_URL"].startswith("redis://redis:")
    assert (
        env["DATABASE_URL"].startswith("postgresql://privrank:")
        and "@postgres:5432/privrank" in env["DATABASE_URL"]
    )
    assert "${PRIVRANK_ADMIN_KEY:?" in env["PRIVRANK_ADMIN_KEY"]  # required: no key generated per instance
    # The instances trust X-Forwarded-For from the proxy's fixed address, and nobody else.
    proxy_ip = services["proxy"]["networks"]["backend"]["ipv4_address"]
    assert env["PRIVRANK_FORWARDED_ALLOW_IPS"] == proxy_ip
    subnet = compose["networks"]["backend"]["ipam"]["config"][0]["subnet"]
    assert proxy_ip.rsplit(".", 1)[0] == subnet.split("/")[0].rsplit(".", 1)[0]
    example = dict(
        line.split("=", 1) for line in (DEPLOY / "env.example").read_text().splitlines() if "=" in line
    )
    assert set(example) == {"PRIVRANK_ADMIN_KEY", "POSTGRES_PASSWORD"}


def test_the_proxy_spreads_over_both_instances_and_checks_them(compose):
    caddy = (DEPLOY / "Caddyfile").read_text()
    block = re.search(r"reverse_proxy ([^{]+)\{([^}]*)\}", caddy)
    assert block is not None
    upstreams = shlex.split(block.group(1))
    assert upstreams == ["api1:8000", "api2:8000"]
    options = dict(line.split(None, 1) for line in block.group(2).strip().splitlines())
    assert options["lb_policy"].strip() == "round_robin" and options["health_uri"].strip() == "/readyz"
    listen = re.search(r"^:(\d+) \{", caddy, re.M)
    assert listen is not None
    assert compose["services"]["proxy"]["ports"] == [f"{listen.group(1)}:{listen.group(1)}"]
    for name in ("api1", "api2"):
        cmd = compose["services"][name]["command"]
        assert cmd[cmd.index("--port") + 1] == "8000" and cmd[cmd.index("--host") + 1] == "0.0.0.0"


def test_the_image_runs_as_api_or_worker():
    dockerfile = (Path(__file__).resolve().parent.parent / "Dockerfile").read_text()
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M)
    assert cmd is not None and yaml.safe_load(cmd.group(1))[:2] == ["privrank", "serve"]
    assert "privrank privrank worker" in dockerfile  # documented: the same image, another command
    assert re.search(r"^USER privrank$", dockerfile, re.M)
