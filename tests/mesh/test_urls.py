"""Credentials in mesh URLs are masked in every form, and the mesh knows its timeouts."""

from __future__ import annotations

import pytest

from plait.errors import ConfigError, MeshUnavailable
from plait.mesh import open_mesh, redact_url
from plait.mesh._urls import url_secrets
from plait.mesh.redis import RedisMesh

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@h:6379/0?prefix=t", "redis://:***@h:6379/0?prefix=t"),
        ("redis://ana:p%40ss@h/0", "redis://ana:***@h/0"),
        ("redis://ana@h/0", "redis://ana@h/0"),  # a user name alone is no secret
        ("redis://h/0?prefix=t&password=sec", "redis://h/0?prefix=t&password=***"),
        (
            "rediss://u:pw@h/0?ssl_keyfile_password=kk&ssl_certfile=/c.pem&ssl_password=x",
            "rediss://u:***@h/0?ssl_keyfile_password=***&ssl_certfile=/c.pem&ssl_password=***",
        ),
        ("redis://h/0?PASSWORD=sec#frag", "redis://h/0?PASSWORD=***#frag"),
        ("redis://:pw@[::1/0", "redis://:***@[::1/0"),  # malformed, masked all the same
        ("sqlite:///.plait/mesh.db", "sqlite:///.plait/mesh.db"),
        ("memory://", "memory://"),
    ],
)
def test_every_credential_form_is_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_url_secrets_lists_each_secret_as_written_and_decoded() -> None:
    url = "rediss://u:p%40ss@h/0?password=q%26w&ssl_keyfile_password=kk&prefix=pw"
    assert set(url_secrets(url)) == {"p%40ss", "p@ss", "q%26w", "q&w", "kk"}


async def test_errors_of_an_unreachable_mesh_mask_query_secrets() -> None:
    url = "rediss://:s3cret-pw@127.0.0.1:1/0?password=q-s3cret&ssl_password=k-s3cret"
    mesh = open_mesh(url, connect_timeout=0.5)
    assert mesh.url == "rediss://:***@127.0.0.1:1/0?password=***&ssl_password=***"
    with pytest.raises(MeshUnavailable) as info:
        await mesh.open()
    assert "s3cret" not in str(info.value) and "password=***" in str(info.value)
    await mesh.close()


def test_timeouts_are_url_options_and_not_passed_to_redis() -> None:
    mesh = open_mesh("redis://h/0?prefix=t&timeout=0.25&connect_timeout=2&health_check_interval=3")
    assert isinstance(mesh, RedisMesh) and mesh.prefix == "t:"  # with its separator
    kwargs = mesh._client.connection_pool.connection_kwargs
    # the timeout bounds each mesh operation, never redis-py's per-command socket timeout
    assert mesh.timeout == 0.25 and kwargs["socket_timeout"] is None
    assert kwargs["socket_connect_timeout"] == 2
    assert kwargs["health_check_interval"] == 3 and "timeout" not in kwargs


@pytest.mark.parametrize("option", ["timeout=0", "timeout=soon", "connect_timeout=-1"])
def test_bad_timeouts_are_config_errors(option: str) -> None:
    with pytest.raises(ConfigError, match="must be > 0 seconds"):
        open_mesh(f"redis://:pw@h/0?{option}")


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret@[::1/0",
        "rediss://h/0?no_such_password=s3cret",  # an option redis-py refuses
    ],
)
def test_a_malformed_url_is_a_config_error_without_its_secrets(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_mesh(url)
    assert "s3cret" not in str(info.value) and "***" in str(info.value)
