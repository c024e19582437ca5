#!/usr/bin/env bash
# Installs what ovpnperf needs on Debian (as root) and builds ./bin/ovpnperf.
# Idempotent: packages already present are left alone.
#   ./scripts/install.sh          installs what is missing, builds ./bin/ovpnperf
#   ./scripts/install.sh --deb    the same, then builds the Debian package
#                                 (scripts/build-deb.sh) and installs it
#                                 (/usr/bin/ovpnperf, man pages, completions,
#                                 ovpnperf-cluster@.service); remove it with
#                                 `apt-get remove ovpnperf`
set -euo pipefail
cd "$(dirname "$0")/.."
deb=false
case "${1:-}" in
  "") ;;
  --deb) deb=true ;;
  *) echo "install.sh: unknown argument ${1}; the only option is --deb" >&2; exit 2 ;;
esac

# program -> Debian package (chromium: the report tests render HTML in it headless;
# nftables: the advise test applies its nft TCPMSS lines in a throw-away namespace;
# jq: the CI-gate examples of docs/schemas.md pipe compare --json into it;
# prometheus: the metrics tests run promtool and a Prometheus in a lab namespace)
need=(
  "ip:iproute2" "tc:iproute2" "iptables:iptables" "ip6tables-restore:iptables"
  "openvpn:openvpn" "iperf3:iperf3" "openssl:openssl" "tcpdump:tcpdump"
  "ping:iputils-ping" "sockperf:sockperf" "taskset:util-linux" "unshare:util-linux"
  "sysctl:procps" "gcc:gcc" "git:git" "chromium:chromium"
  "systemd-analyze:systemd" "man:man-db" "dpkg-deb:dpkg"
  "etcd:etcd-server" "etcdctl:etcd-client" "nft:nftables"
  "jq:jq" "prometheus:prometheus" "promtool:prometheus"
)
missing=()
for pair in "${need[@]}"; do
  prog=${pair%%:*} pkg=${pair#*:}
  command -v "$prog" >/dev/null 2>&1 || missing+=("$pkg")
done
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  missing+=(golang-go)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # iperf3's package asks whether to start a daemon; say no.
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi
# Debian's openvpn, iperf3, etcd-server and prometheus packages may start
# system services when this script installs them; ovpnperf runs its own
# processes (etcd and Prometheus in lab namespaces, see internal/etcdsrv and
# internal/exporter's tests) and needs none of them.
# Only the services of packages installed just now are disabled: on a server
# that already runs OpenVPN or etcd, those services are the admin's, not ours.
# Without systemd as init, the package's init script may have started etcd
# (as user etcd, with /run/etcd.pid): stop that one by its pid file, never by
# name, since lab etcds of running tests are etcd processes too. Prometheus
# the same way (its init script keeps /run/prometheus/prometheus.pid).
installed_now=" ${missing[*]:-} "
for pair in "openvpn:openvpn" "iperf3:iperf3" "etcd-server:etcd" "prometheus:prometheus"; do
  pkg=${pair%%:*} svc=${pair#*:}
  case "$installed_now" in *" $pkg "*) ;; *) continue ;; esac
  systemctl disable --now "$svc" >/dev/null 2>&1 || true
  if [ "$svc" = etcd ] && [ -x /etc/init.d/etcd ] && [ -f /run/etcd.pid ] && ! [ -d /run/systemd/system ]; then
    /etc/init.d/etcd stop >/dev/null 2>&1 || true
    update-rc.d etcd disable >/dev/null 2>&1 || true
  fi
  if [ "$svc" = prometheus ] && [ -x /etc/init.d/prometheus ] && ! [ -d /run/systemd/system ]; then
    /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
done

PATH=/usr/local/go/bin:$PATH
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
mkdir -p bin
# -buildvcs=auto overrides a GOFLAGS=-buildvcs=false in the Go environment:
# `ovpnperf version` reports the git revision the binary was built from.
go build -buildvcs=auto -o bin/ovpnperf ./cmd/ovpnperf
echo "built $(pwd)/bin/ovpnperf" >&2
if $deb; then
  pkg=$(./scripts/build-deb.sh dist)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "./$pkg" >/dev/null
  echo "installed $pkg: $(command -v ovpnperf)" >&2
fi
