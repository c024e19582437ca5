#!/usr/bin/env bash
# Builds a Debian package of ovpnperf from this checkout:
#   ./scripts/build-deb.sh [OUTDIR]      (default OUTDIR: dist)
# It holds the binary (/usr/bin/ovpnperf), a man page per command, bash and
# zsh completions, and the template unit ovpnperf-cluster@.service. Install
# it with `apt-get install ./dist/ovpnperf_*.deb` (apt brings the programs it
# depends on), or with `./scripts/install.sh --deb`. Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
PATH=/usr/local/go/bin:$PATH
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

arch=$(dpkg --print-architecture)
# A Debian version that sorts by commit time: 0.0~gitYYYYMMDDhhmmss.HASH,
# +dirty when the tree has uncommitted changes.
if rev=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  ver="0.0~git$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S).$rev"
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || ver="$ver+dirty"
  maintainer=$(git log -1 --format='%an <%ae>')
else
  ver="0.0~unknown"
  maintainer="ovpnperf maintainers <root@localhost>"
fi

stage=$(mktemp -d /tmp/ovpnperf-deb-XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" \
  "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/lib/systemd/system" "$root/usr/share/doc/ovpnperf" "$stage/completion"

# The same build as install.sh (dynamically linked to libc for the resolver).
go build -buildvcs=auto -o "$root/usr/bin/ovpnperf" ./cmd/ovpnperf
"$root/usr/bin/ovpnperf" gendoc --man "$root/usr/share/man/man1" --completion "$stage/completion" \
  --systemd "$root/lib/systemd/system" --exe /usr/bin/ovpnperf
mv "$stage/completion/ovpnperf.bash" "$root/usr/share/bash-completion/completions/ovpnperf"
mv "$stage/completion/_ovpnperf" "$root/usr/share/zsh/vendor-completions/_ovpnperf"
gzip -9n "$root"/usr/share/man/man1/*.1
cp README.md "$root/usr/share/doc/ovpnperf/"
for f in docs/*.md; do [ -e "$f" ] && cp "$f" "$root/usr/share/doc/ovpnperf/"; done
gzip -9n "$root"/usr/share/doc/ovpnperf/*.md

cat > "$root/DEBIAN/control" <<CONTROL
Package: ovpnperf
Version: $ver
Architecture: $arch
Maintainer: $maintainer
Section: net
Priority: optional
Depends: libc6, iproute2, iptables, openvpn, iperf3, openssl, procps, util-linux
Recommends: tcpdump, iputils-ping, sockperf, etcd-server, etcd-client
Installed-Size: $(du -sk "$root" | cut -f1)
Description: measure, rebuild and tune OpenVPN paths on a real kernel
 ovpnperf measures OpenVPN tunnels and the paths under them (path MTU, RTT,
 throughput inside and outside the tunnel, packet rate, crypto speed, CPU per
 byte), rebuilds such paths in Linux network namespaces, runs real OpenVPN
 and iperf3 across them, recommends settings and verifies them, and runs one
 OpenVPN server per CPU behind one port or a dispatcher.
CONTROL
# systemd reads a new or removed unit file only after a reload.
for script in postinst postrm; do
  cat > "$root/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null 2>&1 || true; fi
SCRIPT
  chmod 0755 "$root/DEBIAN/$script"
done

mkdir -p "$out"
deb="$out/ovpnperf_${ver}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
