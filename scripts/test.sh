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
# Compile every test binary first with both CPUs (-exec /bin/true runs
# none of them): on a fresh machine that takes 2 minutes instead of about
# 4 one package at a time. The run below then only links and runs.
go test -count=1 -exec /bin/true ./... > /dev/null
# Packages whose tests build no lab and measure nothing (parsers, golden
# files, rules, HTML) run first with both CPUs: nothing of theirs is a
# measurement that another package's load could spoil. Every other package,
# a new one included, runs one at a time.
unit="./internal/advise ./internal/capture ./internal/certs ./internal/dco
./internal/inputfile ./internal/measure ./internal/netns ./internal/outputfile
./internal/printable ./internal/realnet ./internal/report ./internal/rules
./internal/runner ./internal/shellquote ./internal/syncbuf ./internal/tune
./internal/usage ./internal/verdict ./internal/vpnproc"
go test -count=1 $unit
go test -p 1 -count=1 -timeout 20m $(go list ./... | grep -vxF "$(go list $unit)")
