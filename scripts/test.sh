#!/usr/bin/env bash
# Runs every ovpnperf test: format and vet checks, unit tests, and the
# integration tests that build real labs and run real openvpn and iperf3
# (root).
#
# Each package's test binary is linked once (go test -c), then run from its
# package directory, in two phases. First every package, three at a time,
# with the measuring tests (those that judge a rate, a sample's validity
# or a time: testenv.Exclusive) deferred; then the measuring tests, one at
# a time, with only the tolerant tests (testenv.Tolerant) beside them.
# docs/testing.md says more.
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

# run_pkg IMPORTPATH [PHASE RUN]: runs the package's test binary in its
# directory and prints one line, as go test does; the verbose log stays in
# $logs. PHASE "measure" runs only the tests named by the -test.run pattern
# RUN; otherwise the measuring tests are deferred (testenv.Exclusive).
run_pkg() {
  local pkg=$1 phase=${2:-} run=${3:-} dir bin log start rc=0 took args
  dir=$(go list -f '{{.Dir}}' "$pkg")
  bin=$bins/$(basename "$pkg").test # go test -c -o DIR/ names it so
  [ -x "$bin" ] || { [ -n "$phase" ] || printf '?   \t%s\t[no test files]\n' "$pkg"; return 0; }
  # A copy of the command per package: some tests look for processes of
  # their own binary, and another package's labs must not be theirs.
  # (One per phase too: a package's tolerant tests run beside its
  # measuring ones.)
  local own=$bins/cmd-$(basename "$pkg")${phase:+-$phase}
  mkdir -p "$own"
  cp "$bins/ovpnperf" "$own/ovpnperf"
  export OVPNPERF_TEST_BINARY=$own/ovpnperf
  export OVPNPERF_TEST_PACKAGE=$pkg
  args=(-test.count=1 -test.timeout=20m -test.v)
  log=$logs/$(echo "$pkg" | tr / _).log
  if [ -n "$phase" ]; then
    args+=(-test.run "^($run)\$" -test.parallel 8)
    log=${log%.log}.$phase.log
    unset OVPNPERF_TEST_DEFER_EXCLUSIVE
  fi
  # The tolerant tests take no host lock: they run beside the measuring
  # tests on purpose.
  if [ "$phase" = tolerant ]; then export OVPNPERF_TEST_NO_HOST_LOCK=1; fi
  start=$(date +%s%N)
  (cd "$dir" && "$bin" "${args[@]}") > "$log" 2>&1 || rc=$?
  took=$(( ($(date +%s%N) - start) / 100000000 ))
  took=$((took / 10)).$((took % 10))
  if [ $rc -eq 0 ]; then
    printf 'ok  \t%s\t%ss%s\n' "$pkg" "$took" "${phase:+ ($phase tests)}"
  else
    grep -E '^(\s*--- FAIL|panic:|FAIL)' "$log" | head -40 || true
    printf 'FAIL\t%s\t%ss%s (log: %s)\n' "$pkg" "$took" "${phase:+ ($phase tests)}" "$log"
  fi
  return $rc
}
export -f run_pkg
export bins logs

# The longest packages first, so that the lanes end together.
all=$(go list "${pkgs[@]}")
order="cmd/ovpnperf internal/recipe internal/cluster internal/pps internal/emulate internal/lab internal/iperf"
sorted=()
for o in $order; do
  for p in $all; do [[ $p == */$o ]] && sorted+=("$p"); done
done
for p in $all; do
  case " ${sorted[*]} " in *" $p "*) ;; *) sorted+=("$p") ;; esac
done

status=0
# Phase 1: every test but the measuring ones, three packages at a time
# (their tests wait on round trips and timers more than they use the
# CPUs, and none of them judges a rate or a time).
deferred=$logs/deferred.txt
: > "$deferred"
export OVPNPERF_TEST_DEFER_EXCLUSIVE=$deferred
printf '%s\n' "${sorted[@]}" | xargs -P 3 -I{} bash -c 'run_pkg {}' || status=1
# Phase 2: the measuring tests, one at a time, and beside them the
# tolerant tests (testenv.Tolerant: slow, long paths whose tolerances far
# exceed what the measuring tests' load does, and whose own load is small).
names() { awk -F'\t' -v p="$1" -v k="$2" '$1 == p && $3 == k { print $2 }' "$deferred" | sort -u | paste -sd'|'; }
# The tolerant tests start after the first package's measuring tests,
# which include those that look at the host as a whole (bad input that
# must leave no lab): another test's lab being built is not theirs.
tolerant=()
start_tolerant() {
  for p in "${sorted[@]}"; do
    run=$(names "$p" tolerant)
    [ -n "$run" ] || continue
    run_pkg "$p" tolerant "$run" &
    tolerant+=($!)
  done
}
started=false
for p in "${sorted[@]}"; do
  run=$(names "$p" exclusive)
  [ -n "$run" ] || continue
  run_pkg "$p" measure "$run" || status=1
  $started || { start_tolerant; started=true; }
done
$started || start_tolerant
for pid in "${tolerant[@]}"; do wait "$pid" || status=1; done

# Top-level tests only: subtests are counted with their test. A test
# deferred to phase 2 is not a skip.
count() { cat "$logs"/*.log | grep -cE "$1" || true; }
passed=$(count '^--- PASS')
failed=$(count '^--- FAIL')
skipped=$(( $(count '^--- SKIP') - $(count "^    [^ ]+\.go:[0-9]+: deferred to the measuring phase") ))
echo "logs: $logs"
echo "tests: $passed passed, $failed failed, $skipped skipped"
if [ $status -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "a test binary failed outside any test (build, TestMain, timeout or panic): see the logs" >&2
fi
exit $status
