#!/usr/bin/env bash
# Builds the etcd server that the etcdlock tests run against, from the Go module in
# tools/etcd (go.etcd.io/etcd/server/v3 at the version pinned in tools/etcd/go.mod),
# into ${XDG_CACHE_HOME:-$HOME/.cache}/distlock/etcd-<version>/etcd, where
# internal/testenv looks for it.
#
# Idempotent: it does nothing when the binary there was built from the same
# tools/etcd sources with the same Go toolchain. scripts/install.sh calls it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/tools/etcd

version=$(sed -nE 's#^[[:space:]]*(require[[:space:]]+)?go\.etcd\.io/etcd/server/v3[[:space:]]+(v[^[:space:]]+).*#\2#p' "$src/go.mod" | head -n1)
if [[ -z $version ]]; then
	echo "build-etcd: no go.etcd.io/etcd/server/v3 requirement in $src/go.mod" >&2
	exit 1
fi

cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/distlock/etcd-$version
mkdir -p "$cache"

# One build at a time (several test runs or install steps may start together).
exec 9>"$cache/.lock"
flock 9

stamp=$(cd "$src" && { cat go.mod go.sum ./*.go; go version; } | sha256sum | cut -d' ' -f1)
if [[ -x $cache/etcd && -f $cache/stamp && $(cat "$cache/stamp") == "$stamp" ]]; then
	echo "build-etcd: etcd $version is up to date in $cache"
	exit 0
fi

echo "build-etcd: building etcd $version into $cache"
tmp=$(mktemp "$cache/etcd.XXXXXX")
trap 'rm -f "$tmp"' EXIT
(cd "$src" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false -o "$tmp" .)
"$tmp" --version >/dev/null
mv -f "$tmp" "$cache/etcd"
printf '%s\n' "$stamp" >"$cache/stamp"
echo "build-etcd: built $("$cache/etcd" --version | head -n1)"
