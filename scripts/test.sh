#!/usr/bin/env bash
# Runs every ovpnperf test: format and vet checks, unit tests, and the
# integration tests that build real labs and run real openvpn and iperf3
# (root). Packages run one at a time so that measurements do not compete for
# the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
PATH=/usr/local/go/bin:$PATH
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
go test -p 1 -count=1 -timeout 14m ./...
