#!/usr/bin/env bash
# Prepares the runcycles face: the same venv as the Python face (python/scripts/test.sh
# installs runcycles 0.5.3 beside the cycles wheel), so its prepare.sh does the work.
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../python/prepare.sh"
