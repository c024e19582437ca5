#!/usr/bin/env bash
# Puts advise to the test on one path: builds the path in a lab, runs
# `ovpnperf probe` from the client towards the server, asks `ovpnperf advise`
# for a variant from that probe (not from the lab's settings), then measures
# advise's variant, the built-in variants and a sweep in one interleaved
# `lab run`. Takes 10–25 minutes; a measurement, not a test: run it on an
# idle machine and keep `uptime` beside the results.
#
#   scripts/advise-sweep.sh OUTDIR TIME REPEAT [--proto udp|tcp] -- [lab path flags]
#   scripts/advise-sweep.sh /tmp/a 10s 3 -- --rate 20mbit --rtt 200ms
#   scripts/advise-sweep.sh /tmp/c 3s 3 -- --network lan
#   scripts/advise-sweep.sh /tmp/t 10s 3 --proto tcp -- --rate 20mbit --rtt 200ms
#
# UDP (the default) sweeps tun-mtu {1400, 1500, 9000 + mssfix 0} × sndbuf/rcvbuf
# {OS default, 512 KiB, 4 MiB} beside the built-ins. TCP transport
# (--proto tcp: advise and every row run over TCP) sweeps tun-mtu {1500,
# 9000 + mssfix 0} × sndbuf/rcvbuf {OS default, 512 KiB, 4 MiB} × tcp-nodelay
# {off, on}: what advise says over TCP rests on this sweep over three TCP
# paths (LAN, 50 ms, 300 ms: docs/measurements.md, "TCP transport sweep");
# run it on your kind of path to decide tcp-nodelay there.
#
# OUTDIR gets probe.json, advise.txt, advise.json, run.json (schema
# ovpnperf/run/v2: `ovpnperf report OUTDIR/run.json -o page.html` charts it)
# and uptime.txt (the load average before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() {
  echo "usage: scripts/advise-sweep.sh OUTDIR TIME REPEAT [--proto udp|tcp] -- [lab path flags]" >&2
  exit 2
}
[ $# -ge 4 ] || usage
out=$1 t=$2 rep=$3 proto=udp
shift 3
if [ "$1" = "--proto" ]; then
  [ $# -ge 3 ] || usage
  proto=$2
  shift 2
fi
case "$proto" in udp | tcp) ;; *) usage ;; esac
[ "${1:-}" = "--" ] || usage
shift
O=$(pwd)/bin/ovpnperf
[ -x "$O" ] || { echo "advise-sweep: $O missing: run scripts/install.sh first" >&2; exit 2; }
mkdir -p "$out"
uptime >"$out/uptime.txt"
name=advsweep$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')
# lab up takes path flags only; --network lan (lab run's built-in LAN) is
# lab up's unshaped default.
labflags=()
for a in "$@"; do [ "$a" = "--network" ] || [ "$a" = "lan" ] || labflags+=("$a"); done
"$O" lab up --name "$name" "${labflags[@]}" >/dev/null
trap '"$O" lab down "$name" >/dev/null 2>&1 || true' EXIT
"$O" lab exec "$name" server -- iperf3 -s -1 >/dev/null 2>&1 &
sleep 1
"$O" lab exec "$name" client -- "$O" probe 198.51.100.2 --iperf3 5201 --json >"$out/probe.json"
"$O" lab down "$name" >/dev/null
trap - EXIT
"$O" advise --probe "$out/probe.json" --proto "$proto" >"$out/advise.txt"
"$O" advise --probe "$out/probe.json" --proto "$proto" --json >"$out/advise.json"
variant=$(sed -n 's/^ *"variant": "\(.*\)",\{0,1\}$/\1/p' "$out/advise.json" | head -1)
echo "advise's variant: $variant" >&2
B4=4194304 B5=524288
if [ "$proto" = tcp ]; then
  sweep=()
  for tm in 1500 9000; do
    mtu="" tn=t1500
    [ "$tm" = 9000 ] && mtu="tun-mtu 9000;mssfix 0;" tn=j
    for b in os 512 4m; do
      buf=""
      [ "$b" = 512 ] && buf="sndbuf $B5;rcvbuf $B5;"
      [ "$b" = 4m ] && buf="sndbuf $B4;rcvbuf $B4;"
      for nd in off on; do
        d="$mtu$buf"
        [ "$nd" = on ] && d="${d}tcp-nodelay;"
        d=${d%;}
        [ -n "$d" ] || continue # the default row is below
        sweep+=(--variant "$tn-b$b-nd$nd=$d")
      done
    done
  done
  "$O" lab run "$@" --proto tcp --repeat "$rep" --time "$t" --out "$out/run.json" \
    --variant "$variant" --variant default "${sweep[@]}"
else
  "$O" lab run "$@" --repeat "$rep" --time "$t" --out "$out/run.json" \
    --variant "$variant" --variant default --variant aes256gcm --variant aes128gcm \
    --variant chacha20 --variant aes256cbc --variant none --variant jumbo \
    --variant "t1400=tun-mtu 1400" --variant "t1400b512=tun-mtu 1400;sndbuf $B5;rcvbuf $B5" \
    --variant "t1400b4m=tun-mtu 1400;sndbuf $B4;rcvbuf $B4" \
    --variant "b512=sndbuf $B5;rcvbuf $B5" --variant "b4m=sndbuf $B4;rcvbuf $B4" \
    --variant "j512=tun-mtu 9000;mssfix 0;sndbuf $B5;rcvbuf $B5" \
    --variant "j4m=tun-mtu 9000;mssfix 0;sndbuf $B4;rcvbuf $B4"
fi
uptime >>"$out/uptime.txt"
