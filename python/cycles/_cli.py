"""The ``cycles`` command of the wheel (``[project.scripts]``): the Rust CLI, in-process.

``cycles serve``, ``cycles demo``, ``cycles plan`` and ``cycles journal`` are the same command
the Rust binary runs (bindings/cli), linked into the extension module, so no Rust toolchain and
no second executable are needed.
"""

from __future__ import annotations

import signal
import sys

from cycles import _native


def main() -> int:
    """Runs ``cycles`` on ``sys.argv`` and returns its exit code."""
    # Python's own SIGINT handler only sets a flag that no Python code reads while the native
    # command runs: the default action (or the handler `cycles serve` installs) must see Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _native.cli_run(["cycles", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
