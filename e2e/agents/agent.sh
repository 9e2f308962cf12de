# agent.sh holds what build.sh and build-consul.sh share; they source it and call build_agent.
#
#   build_agent NAME PRODUCT VERSION MINUTES [VAR=value ...]
#
# builds github.com/hashicorp/NAME, pinned at VERSION by ./NAME/go.mod, into
# <repo>/.cache/agents/NAME-vVERSION/NAME (or $FFT_AGENT_CACHE instead of .cache/agents) with
# the VAR=value settings in its environment, and prints the binary's path. It does nothing
# when the cached binary already reports "PRODUCT vVERSION".

build_agent() {
	local name="$1" product="$2" version="$3" minutes="$4"
	shift 4
	local script here root cache out bin
	script="$(basename "$0")"
	here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
	root="$(cd "${here}/../.." && pwd)"
	cache="${FFT_AGENT_CACHE:-${root}/.cache/agents}"
	out="${cache}/${name}-v${version}"
	bin="${out}/${name}"

	# The module must pin the same version the script names.
	if ! grep -Eq "github.com/hashicorp/${name} v${version}( |$)" "${here}/${name}/go.mod"; then
		echo "${script}: ${here}/${name}/go.mod does not require github.com/hashicorp/${name} v${version}" >&2
		exit 1
	fi

	# Read the whole version text first: with pipefail, "| head -n1" would kill
	# the agent with SIGPIPE and make a good cached binary look stale.
	local current
	current="$([[ -x "${bin}" ]] && "${bin}" version 2>/dev/null || true)"
	if [[ "${current%%$'\n'*}" == "${product} v${version}" ]]; then
		echo "${bin}"
		return 0
	fi

	mkdir -p "${out}"
	echo "${script}: building ${product} v${version} into ${out} (about ${minutes} minutes on 2 cores)" >&2
	local start
	start=$(date +%s)
	# Build into a temporary name and move it into place, so an interrupted build
	# never leaves a half-written binary that looks cached.
	(cd "${here}/${name}" && env "$@" go build -trimpath -o "${bin}.tmp" "github.com/hashicorp/${name}")
	mv "${bin}.tmp" "${bin}"
	echo "${script}: built in $(( $(date +%s) - start ))s" >&2
	"${bin}" version >&2
	echo "${bin}"
}
