#!/usr/bin/env bash
# build.sh builds the Nomad agent pinned by nomad/go.mod into the ignored cache
# folder and prints its path. It does nothing when the cached binary already
# reports the pinned version, so it is cheap to call before every test run.
#
#   e2e/agents/build.sh            # -> <repo>/.cache/agents/nomad-v1.6.1/nomad
#   FFT_AGENT_CACHE=/elsewhere e2e/agents/build.sh
set -euo pipefail

NOMAD_VERSION="1.6.1"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
cache="${FFT_AGENT_CACHE:-${root}/.cache/agents}"
out="${cache}/nomad-v${NOMAD_VERSION}"
bin="${out}/nomad"

# The module must pin the same version this script names.
if ! grep -Eq "github.com/hashicorp/nomad v${NOMAD_VERSION}( |$)" "${here}/nomad/go.mod"; then
	echo "build.sh: ${here}/nomad/go.mod does not require github.com/hashicorp/nomad v${NOMAD_VERSION}" >&2
	exit 1
fi

# Read the whole version text first: with pipefail, "| head -n1" would kill
# the agent with SIGPIPE and make a good cached binary look stale.
version="$([[ -x "${bin}" ]] && "${bin}" version 2>/dev/null || true)"
if [[ "${version%%$'\n'*}" == "Nomad v${NOMAD_VERSION}" ]]; then
	echo "${bin}"
	exit 0
fi

mkdir -p "${out}"
echo "build.sh: building Nomad v${NOMAD_VERSION} into ${out} (about 5 minutes on 2 cores)" >&2
start=$(date +%s)
# Build into a temporary name and move it into place, so an interrupted build
# never leaves a half-written binary that looks cached.
(cd "${here}/nomad" && CGO_ENABLED="${CGO_ENABLED:-1}" go build -trimpath -o "${bin}.tmp" github.com/hashicorp/nomad)
mv "${bin}.tmp" "${bin}"
echo "build.sh: built in $(( $(date +%s) - start ))s" >&2
"${bin}" version >&2
echo "${bin}"
