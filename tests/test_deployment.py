"""The deployment files, checked without Docker: docker-compose.yml and the Dockerfile.

Docker cannot run here, so the compose file is held to the parts of the Compose
specification it uses (known keys, declared volumes, dependency conditions), to what
durability needs (Redis with AOF fsynced every second, on a named volume, with a
healthcheck and a password from the env file, never written in the file), and every
service's command is parsed by the command line it names: ``plait`` subcommands by
plait's own CLI, ``ray`` ones by Ray's. The same topology runs for real, without
Docker, in ``tests/runs/test_ray_hosts.py``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

TOP_KEYS = {"name", "services", "volumes", "networks", "configs", "secrets"}
SERVICE_KEYS = {
    "build", "image", "command", "entrypoint", "environment", "env_file", "ports",
    "volumes", "depends_on", "healthcheck", "restart", "deploy", "shm_size", "working_dir",
    "networks", "labels", "user", "init", "stop_grace_period", "stop_signal", "profiles",
}  # fmt: skip
"""The service keys of the Compose specification this project may use."""
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "disable"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def commands(service: dict[str, Any]) -> list[list[str]]:
    """The command lines a service runs (a ``sh -c`` script split on ``&&``)."""
    command = service.get("command")
    if command is None:
        return []
    argv = command if isinstance(command, list) else shlex.split(command)
    if argv[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in argv[2].split("&&")]
    return [argv]


def test_the_compose_file_keeps_to_the_specification(compose: dict[str, Any]) -> None:
    assert set(compose) <= TOP_KEYS | {k for k in compose if k.startswith("x-")}
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        assert set(service) <= SERVICE_KEYS, (name, set(service) - SERVICE_KEYS)
        assert "image" in service or "build" in service, name
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            if not source.startswith((".", "/")):
                assert source in declared, (name, source)
        for needed, how in (service.get("depends_on") or {}).items():
            assert needed in compose["services"], (name, needed)
            assert how["condition"] in CONDITIONS, (name, how)
            if how["condition"] == "service_healthy":
                assert "healthcheck" in compose["services"][needed], (name, needed)
        assert set(service.get("healthcheck", {})) <= HEALTHCHECK_KEYS, name
        if "build" in service:
            assert (ROOT / service["build"] / "Dockerfile").is_file()


def test_redis_keeps_every_acknowledged_commit_on_a_volume(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    (argv,) = commands(redis)
    options = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert argv[0] == "redis-server"
    assert options["--appendonly"] == "yes" and options["--appendfsync"] == "everysec"
    assert re.fullmatch(r"\$\{REDIS_PASSWORD:\?.*\}", options["--requirepass"])
    assert any(v.endswith(":/data") and v.split(":")[0] in compose["volumes"]
               for v in redis["volumes"])  # fmt: skip
    assert "healthcheck" in redis
    # The password comes from the env file, never from this file.
    assert "change-me" not in COMPOSE.read_text()
    assert "REDIS_PASSWORD=" in (ROOT / "plait.env.example").read_text()
    assert "plait.env" in (ROOT / ".gitignore").read_text().split()


def test_the_topology_is_a_ray_head_two_ray_workers_and_the_plait_worker(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert commands(services["ray-head"])[0][:3] == ["ray", "start", "--head"]
    assert commands(services["ray-worker"])[0][:2] == ["ray", "start"]
    assert services["ray-worker"]["deploy"]["replicas"] == 2
    plait = commands(services["plait"])[-1]
    assert plait[:2] == ["exec", "plait"] or plait[0] == "plait"
    line = " ".join(plait)
    assert "worker --runtime ray" in line and "--hosts 2" in line
    assert services["plait"]["environment"]["PLAIT_MESH"].startswith("redis://")


def test_every_services_command_exists_in_the_package(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    import typer.main
    from ray.scripts.scripts import cli as ray_cli

    from plait.cli import app

    plait_cli = typer.main.get_command(app)
    monkeypatch.setenv("PLAIT_MESH", "redis://127.0.0.1:6379/0")
    checked = 0
    for service in compose["services"].values():
        for argv in commands(service):
            if argv[0] == "exec":
                argv = argv[1:]
            program, name, *rest = argv
            if program == "plait":
                group = plait_cli
            elif program == "ray":
                group = ray_cli
            else:
                assert program == "redis-server"
                continue
            # plait's commands are imported on use: ask the group, not its dict.
            command = group.get_command(group.context_class(group), name)  # type: ignore[attr-defined]
            assert command is not None, argv
            command.make_context(name, list(rest))  # parses every option, or raises
            checked += 1
    # head, worker, the plait service's ray start and worker, and plait-pg's ray start,
    # mesh migrate and worker
    assert checked == 7


def test_prometheus_scrapes_the_plait_service_and_the_dashboard_reads_plait_metrics(
    compose: dict[str, Any],
) -> None:
    from plait.telemetry.metrics import REGISTRY

    prometheus = compose["services"]["prometheus"]
    mounted = {m.split(":")[0]: m.split(":")[1] for m in prometheus["volumes"]}
    assert mounted["./deploy/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    plait = commands(compose["services"][host])[-1]
    assert plait[plait.index("--metrics-port") + 1] == port
    assert set(prometheus["networks"]) & set(compose["services"][host]["networks"])
    # every series the dashboard queries is one plait exports
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    exported = {
        sample for family in REGISTRY.collect() for sample in
        {family.name, *(f"{family.name}{suffix}" for suffix in ("_total", "_bucket"))}
    }  # fmt: skip
    queried = {
        name for panel in dashboard["panels"] for target in panel["targets"]
        for name in re.findall(r"\bplait_[a-z_]+", target["expr"])
    }  # fmt: skip
    assert len(dashboard["panels"]) >= 12
    assert queried and queried <= exported, queried - exported


def test_the_image_is_a_slim_python_with_the_ray_extra() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.1[1-9]-slim\b", text, re.M)
    assert "pip install '.[ray]'" in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^ray = \["ray>=', pyproject, re.M)
    assert re.search(r"^COPY plait ", text, re.M) and re.search(r"^COPY pyproject.toml", text, re.M)


def ray_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run a Ray node or a Ray driver."""
    return {
        name: service
        for name, service in compose["services"].items()
        if any(argv[0] == "ray" or "--runtime ray" in " ".join(argv) for argv in commands(service))
    }


def test_ray_is_kept_on_an_internal_network_with_token_authentication(
    compose: dict[str, Any],
) -> None:
    # Ray's GCS and node ports run code for whoever reaches them: none is published,
    # Ray's traffic has an internal network, and every node presents the token.
    found = ray_services(compose)
    assert set(found) == {"ray-head", "ray-worker", "plait", "plait-pg"}
    networks = compose["networks"]
    assert networks["ray"]["internal"] is True
    assert compose["services"]["redis"]["networks"] == ["mesh"]
    assert found["ray-head"]["networks"] == ["ray"]
    for name, service in found.items():
        assert "ports" not in service, name
        assert "ray" in service["networks"], name
        environment = service["environment"]
        assert environment["RAY_AUTH_MODE"] == "token", name
        assert re.fullmatch(r"\$\{RAY_AUTH_TOKEN:\?.*\}", environment["RAY_AUTH_TOKEN"]), name
    # The token comes from the env file, never from this file, and the example no
    # longer turns authentication off.
    example = (ROOT / "plait.env.example").read_text()
    assert "RAY_AUTH_TOKEN=" in example and "RAY_AUTH_MODE=disabled" not in example
    # Only Redis and Prometheus are published, and only on the loopback interface.
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert name in ("redis", "prometheus"), (name, port)
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_a_postgres_profile_runs_the_mesh_on_postgresql_instead_of_redis(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    by_profile = {
        profile: {name for name, s in services.items() if profile in s.get("profiles", [])}
        for profile in ("redis", "postgres")
    }
    assert by_profile == {
        "redis": {"redis", "plait", "prometheus"},
        "postgres": {"postgres", "plait-pg"},
    }
    unprofiled = {name for name, s in services.items() if "profiles" not in s}
    assert unprofiled == {"ray-head", "ray-worker"}
    for name in unprofiled:  # they start under either profile: they need neither server
        assert not set(services[name].get("depends_on") or {}) & {"redis", "postgres"}
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert re.fullmatch(
        r"\$\{POSTGRES_PASSWORD:\?.*\}", postgres["environment"]["POSTGRES_PASSWORD"]
    )
    assert any(v.endswith(":/var/lib/postgresql/data") and v.split(":")[0] in compose["volumes"]
               for v in postgres["volumes"])  # fmt: skip
    assert "healthcheck" in postgres and "ports" not in postgres
    worker = services["plait-pg"]
    assert worker["environment"]["PLAIT_MESH"].startswith("postgresql://plait:${POSTGRES_PASSWORD")
    assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
    lines = [" ".join(argv) for argv in commands(worker)]
    assert "plait mesh migrate" in lines and "worker --runtime ray" in lines[-1]
    example = (ROOT / "plait.env.example").read_text()
    assert "COMPOSE_PROFILES=redis" in example and "POSTGRES_PASSWORD=" in example


def test_the_installed_ray_has_token_authentication() -> None:
    pytest.importorskip("ray")
    from ray._private.authentication.authentication_token_setup import AUTH_MODE_ENV_VAR

    assert AUTH_MODE_ENV_VAR == "RAY_AUTH_MODE"


def test_the_readme_says_what_an_operator_must_firewall() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "An operator must still firewall" in text
    for port in ("6380", "10001", "8265", "6379"):
        assert port in text
