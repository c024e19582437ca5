#!/usr/bin/env bash
# Runs every ovpnperf test: format and vet checks, unit tests, and the
# integration tests that build real labs and run real openvpn and iperf3
# (root).
#
# Each package's test binary is linked once (go test -c), then run from its
# package directory. The packages whose tests build no lab and measure
# nothing run first, two at a time. The others run two at a time as well,
# and the host test lock keeps their measurements apart: a test that
# judges a rate, a sample's validity or a time holds it exclusively, every
# other lab test shared (internal/testenv/hostlock.go). docs/testing.md
# says more.
#
#   ./scripts/test.sh                  everything
#   ./scripts/test.sh ./internal/lab   only these packages
#
# OVPNPERF_TEST_LOGS=DIR keeps each package's verbose log in DIR (default:
# a new temporary directory, named at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
PATH=/usr/local/go/bin:$PATH
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...

pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
logs=${OVPNPERF_TEST_LOGS:-$(mktemp -d /tmp/ovpnperf-test-logs.XXXXXX)}
mkdir -p "$logs"
bins=$(mktemp -d /tmp/ovpnperf-test-bins.XXXXXX)
trap 'rm -rf "$bins"' EXIT
chmod 755 "$bins" # some tests run the command as an unprivileged user
# Link every test binary once, with both CPUs (go test would link each
# again when it runs it), and the command the tests run as a user would.
go test -c -o "$bins/" "${pkgs[@]}"
go build -buildvcs=auto -o "$bins/ovpnperf" ./cmd/ovpnperf

# Packages whose tests build no lab and measure nothing (parsers, golden
# files, rules, HTML): nothing of theirs is a measurement another package's
# load could spoil, and they hold no host lock, so they run before the rest.
unit=" advise capture certs dco inputfile measure netns outputfile printable
realnet report rules runner shellquote syncbuf tune usage verdict vpnproc "

# run_pkg IMPORTPATH: runs the package's test binary in its directory and
# prints one line, as go test does; the verbose log stays in $logs.
run_pkg() {
  local pkg=$1 dir bin log start rc=0 took
  dir=$(go list -f '{{.Dir}}' "$pkg")
  bin=$bins/$(basename "$pkg").test # go test -c -o DIR/ names it so
  [ -x "$bin" ] || { printf '?   \t%s\t[no test files]\n' "$pkg"; return 0; }
  # A copy of the command per package: some tests look for processes of
  # their own binary, and the other lane's labs must not be theirs.
  mkdir -p "$bins/cmd-$(basename "$pkg")"
  cp "$bins/ovpnperf" "$bins/cmd-$(basename "$pkg")/ovpnperf"
  export OVPNPERF_TEST_BINARY=$bins/cmd-$(basename "$pkg")/ovpnperf
  log=$logs/$(echo "$pkg" | tr / _).log
  start=$(date +%s%N)
  (cd "$dir" && "$bin" -test.count=1 -test.timeout=20m -test.v) > "$log" 2>&1 || rc=$?
  took=$(( ($(date +%s%N) - start) / 100000000 ))
  took=$((took / 10)).$((took % 10))
  if [ $rc -eq 0 ]; then
    printf 'ok  \t%s\t%ss\n' "$pkg" "$took"
  else
    grep -E '^(=== RUN|--- FAIL|\s+--- FAIL|panic:|FAIL)' "$log" | grep -v '^=== RUN' | head -40 || true
    printf 'FAIL\t%s\t%ss (log: %s)\n' "$pkg" "$took" "$log"
  fi
  return $rc
}
export -f run_pkg
export bins logs

all=$(go list "${pkgs[@]}")
first=() rest=()
for p in $all; do
  case " $(echo $unit) " in *" $(basename "$p") "*) first+=("$p") ;; *) rest+=("$p") ;; esac
done
# The longest packages first, so that the two lanes end together.
order="cmd/ovpnperf internal/recipe internal/cluster internal/pps internal/emulate"
sorted=()
for o in $order; do
  for p in "${rest[@]}"; do [[ $p == */$o ]] && sorted+=("$p"); done
done
for p in "${rest[@]}"; do
  case " ${sorted[*]} " in *" $p "*) ;; *) sorted+=("$p") ;; esac
done

status=0
if [ ${#first[@]} -gt 0 ]; then
  printf '%s\n' "${first[@]}" | xargs -P 2 -I{} bash -c 'run_pkg {}' || status=1
fi
if [ ${#sorted[@]} -gt 0 ]; then
  printf '%s\n' "${sorted[@]}" | xargs -P 2 -I{} bash -c 'run_pkg {}' || status=1
fi

# Top-level tests only: subtests are counted with their test.
passed=$(cat "$logs"/*.log | grep -cE '^--- PASS' || true)
failed=$(cat "$logs"/*.log | grep -cE '^--- FAIL' || true)
skipped=$(cat "$logs"/*.log | grep -cE '^--- SKIP' || true)
echo "logs: $logs"
echo "tests: $passed passed, $failed failed, $skipped skipped"
if [ $status -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "a test binary failed outside any test (build, TestMain, timeout or panic): see the logs" >&2
fi
exit $status
