"""The wheel's ``cycles`` console script (``cycles._cli``): the Rust command in-process,
installed beside the interpreter; usage errors, the demo, and ``cycles serve`` stopped by
Ctrl-C (SIGINT), all through the installed script as a user runs it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import cycles


def script() -> Path:
    path = Path(sys.executable).parent / "cycles"
    assert path.is_file(), f"the wheel installs the cycles console script beside {sys.executable}"
    return path


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script()), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_version_and_usage_errors() -> None:
    out = run("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"cycles {cycles.__version__}"
    bad = run("serve", "--port", "not-a-port")
    assert bad.returncode == 2
    assert "invalid value 'not-a-port'" in bad.stderr
    failing = run("demo", "--ttl-ms", "5")
    assert failing.returncode == 1
    assert "error: --ttl-ms must be at least 1000" in failing.stderr


def test_demo_runs_to_the_end() -> None:
    out = run("demo")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Cycles demo:")
    assert "Done. Next: `cycles serve`" in out.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
def test_serve_answers_then_stops_on_ctrl_c() -> None:
    child = subprocess.Popen(
        [str(script()), "serve", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        banner = child.stdout.readline()
        assert banner.startswith("cycles local server listening on http://127.0.0.1:"), banner
        url = banner.split()[-1]
        request = urllib.request.Request(
            f"{url}/v1/balances?tenant=acme", headers={"X-Cycles-API-Key": "cycles-local-key"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            assert "balances" in json.load(response)
        child.send_signal(signal.SIGINT)
        # Ctrl-C shuts the server down cleanly: exit 0, not a KeyboardInterrupt traceback.
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
