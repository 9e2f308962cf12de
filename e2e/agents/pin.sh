#!/usr/bin/env bash
# pin.sh keeps what e2e/agents/nomad builds (the Nomad 1.6.1 agent and the e2e tests) at the
# module versions in nomad/pinned-modules.txt. That module requires the main module, for
# e2e/agentrun, and the main module's newer requirements would raise shared modules (nomad/api
# above all, which must stay 1.6.1-era); the pin block at the end of nomad/go.mod replaces each
# raised one with its pinned version.
#
#   e2e/agents/pin.sh      # check: exit 1 and print the block when it is out of date (make vet)
#   e2e/agents/pin.sh -w   # rewrite the block, then run `go mod tidy` in nomad/
#
# Run -w after a main-module dependency change; the check runs in `make vet`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="${here}/nomad"
root="$(cd "${here}/../.." && pwd)"
begin='// BEGIN pins: written by e2e/agents/pin.sh -w from pinned-modules.txt; do not edit.'
end='// END pins'
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# The module without its pin block, in a scratch folder: its build list shows what the main
# module raises. The replace of the main module is made absolute to work from there.
awk -v b="${begin}" -v e="${end}" '$0 == b { skip = 1 } !skip { print } $0 == e { skip = 0 }' "${mod}/go.mod" |
	sed "s#=> \.\./\.\./\.\.\$#=> ${root}#" >"${tmp}/go.mod"
cp "${mod}/go.sum" "${tmp}/go.sum"
(cd "${tmp}" && GOFLAGS=-mod=mod go list -m -f '{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}' all) >"${tmp}/raised"

block="$(awk 'NR == FNR { if ($0 !~ /^#/ && NF == 2) want[$1] = $2; next }
	($1 in want) && $2 != want[$1] { printf "\t%s => %s %s\n", $1, $1, want[$1] }' "${mod}/pinned-modules.txt" "${tmp}/raised" | sort)"
new="${begin}
replace (
${block}
)
${end}"
# go mod tidy may put a blank line before the end marker: compare without blank lines.
current="$(awk -v b="${begin}" -v e="${end}" '$0 == b { on = 1 } on && NF { print } $0 == e { on = 0 }' "${mod}/go.mod")"

if [[ "${1:-}" == "-w" ]]; then
	awk -v b="${begin}" -v e="${end}" '$0 == b { skip = 1 } !skip { print } $0 == e { skip = 0 }' "${mod}/go.mod" |
		sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"${tmp}/go.mod.new"
	printf '\n%s\n' "${new}" >>"${tmp}/go.mod.new"
	cp "${tmp}/go.mod.new" "${mod}/go.mod"
	echo "pin.sh: wrote $(grep -c . <<<"${block}") pins into ${mod}/go.mod; run 'go mod tidy' there" >&2
	exit 0
fi
if [[ "${current}" != "${new}" ]]; then
	echo "pin.sh: ${mod}/go.mod's pin block is out of date (the main module's requirements changed); run e2e/agents/pin.sh -w. Want:" >&2
	echo "${new}" >&2
	exit 1
fi
