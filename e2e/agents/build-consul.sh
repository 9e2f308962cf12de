#!/usr/bin/env bash
# build-consul.sh builds the Consul agent pinned by consul/go.mod into the ignored
# cache folder and prints its path. It does nothing when the cached binary already
# reports the pinned version, so it is cheap to call before every test run.
#
#   e2e/agents/build-consul.sh     # -> <repo>/.cache/agents/consul-v1.16.1/consul
#   FFT_AGENT_CACHE=/elsewhere e2e/agents/build-consul.sh
#
# Consul 1.16.1 is the last MPL-2.0 release. The checksum database has no entry
# for two of its modules, so this build (only) sets GONOSUMDB for them; go.sum
# in consul/ is committed and still checked. About 11 minutes on 2 cores.
set -euo pipefail

CONSUL_VERSION="1.16.1"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
cache="${FFT_AGENT_CACHE:-${root}/.cache/agents}"
out="${cache}/consul-v${CONSUL_VERSION}"
bin="${out}/consul"

# The module must pin the same version this script names.
if ! grep -Eq "github.com/hashicorp/consul v${CONSUL_VERSION}( |$)" "${here}/consul/go.mod"; then
	echo "build-consul.sh: ${here}/consul/go.mod does not require github.com/hashicorp/consul v${CONSUL_VERSION}" >&2
	exit 1
fi

# Read the whole version text first: with pipefail, "| head -n1" would kill
# the agent with SIGPIPE and make a good cached binary look stale.
version="$([[ -x "${bin}" ]] && "${bin}" version 2>/dev/null || true)"
if [[ "${version%%$'\n'*}" == "Consul v${CONSUL_VERSION}" ]]; then
	echo "${bin}"
	exit 0
fi

mkdir -p "${out}"
echo "build-consul.sh: building Consul v${CONSUL_VERSION} into ${out} (about 11 minutes on 2 cores)" >&2
start=$(date +%s)
# Build into a temporary name and move it into place, so an interrupted build
# never leaves a half-written binary that looks cached.
(cd "${here}/consul" && \
	GONOSUMDB="github.com/hashicorp/hcp-sdk-go,github.com/hashicorp/consul/envoyextensions" \
	CGO_ENABLED="${CGO_ENABLED:-0}" go build -trimpath -o "${bin}.tmp" github.com/hashicorp/consul)
mv "${bin}.tmp" "${bin}"
echo "build-consul.sh: built in $(( $(date +%s) - start ))s" >&2
"${bin}" version >&2
echo "${bin}"
