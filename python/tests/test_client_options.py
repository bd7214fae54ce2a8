"""Client options are checked by the bridge (issue 28): one table and one error text for
every language, naming the option as Python spells it (seconds, snake_case)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import cycles
from cycles.testing import LocalServer


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (
            {"request_timeout": -1},
            "request_timeout must be a finite number of seconds, 0 or more, not -1",
        ),
        (
            {"connect_timeout": -0.5},
            "connect_timeout must be a finite number of seconds, 0 or more, not -0.5",
        ),
        (
            {"request_timeout": True},
            "request_timeout must be a finite number of seconds, 0 or more, not true",
        ),
        (
            {"close_timeout": float("inf")},
            'close_timeout must be a finite number of seconds, 0 or more, not "inf"',
        ),
        (
            {"replay_interval": float("nan")},
            'replay_interval must be a finite number of seconds, 0 or more, not "nan"',
        ),
        (
            {"max_concurrent_requests": -1},
            "max_concurrent_requests must be an integer from 0 to 4294967295, not -1",
        ),
        (
            {"settle_max_attempts": 2.5},
            "settle_max_attempts must be an integer from 0 to 4294967295, not 2.5",
        ),
        (
            {"max_response_bytes": -1},
            "max_response_bytes must be an integer from 0 to 4294967295, not -1",
        ),
        ({"journal_enabled": "yes"}, 'journal_enabled must be a boolean, not "yes"'),
        ({"tenant": 5}, "tenant must be a string, not 5"),
    ],
)
def test_bad_options_are_named_in_the_bridges_words(
    server: LocalServer, kwargs: dict[str, Any], text: str
) -> None:
    with pytest.raises(cycles.InvalidArgumentError) as info:
        cycles.Client(server.url, server.api_key, **kwargs)
    assert info.value.message == text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"request_timeout": 0},
        {"connect_timeout": 0},
        {"max_concurrent_requests": 0},
        {"max_response_bytes": 0},
        {"settle_max_attempts": 0},
        {"replay_interval": 0},
    ],
)
def test_what_core_validates_is_a_config_error(server: LocalServer, kwargs: dict[str, Any]) -> None:
    # Zero is a value; whether it is a usable one is core's rule, as in every language.
    with pytest.raises(cycles.ConfigError):
        cycles.Client(server.url, server.api_key, **kwargs)


def test_values_reach_the_client(server: LocalServer, tmp_path: Path) -> None:
    with cycles.Client(
        server.url,
        server.api_key,
        request_timeout=0.25,
        connect_timeout=0.0001,
        journal_dir=tmp_path,
        close_timeout=0,
    ) as client:
        assert client.request_timeout_ms == 250
        # A positive bound is never rounded down to 0 ms.
        assert client._native.connect_timeout_ms == 1
        assert client.journal_dir == str(tmp_path)
        assert client._close_timeout == 0


def test_from_env_options_are_checked_the_same_way(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CYCLES_BASE_URL", server.url)
    monkeypatch.setenv("CYCLES_API_KEY", server.api_key)
    with pytest.raises(cycles.InvalidArgumentError) as info:
        cycles.Client.from_env(settle_max_attempts=-1)
    assert (
        info.value.message == "settle_max_attempts must be an integer from 0 to 4294967295, not -1"
    )
    with pytest.raises(cycles.InvalidArgumentError, match="not JSON"):
        cycles.Client(server.url, server.api_key, tenant=object())  # type: ignore[arg-type]
