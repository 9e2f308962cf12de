#!/usr/bin/env bash
# build.sh builds the Nomad agent pinned by nomad/go.mod into the ignored cache
# folder and prints its path. It does nothing when the cached binary already
# reports the pinned version, so it is cheap to call before every test run.
#
#   e2e/agents/build.sh            # -> <repo>/.cache/agents/nomad-v1.6.1/nomad
#   FFT_AGENT_CACHE=/elsewhere e2e/agents/build.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/agent.sh"
build_agent nomad Nomad 1.6.1 5 CGO_ENABLED="${CGO_ENABLED:-1}"
