#!/usr/bin/env bash
# Installs the servers that the distlock tests start (internal/testenv): redis-server
# and redis-cli, ZooKeeper (with a Java runtime), PostgreSQL, MariaDB, and etcd
# (built from source by scripts/build-etcd.sh, when that script is present).
#
# Debian/Ubuntu only (apt-get). Idempotent: it installs only the packages whose files
# are missing, and does nothing (quickly) when everything is present. Runs apt-get as
# root, through sudo when not root. The packages' system services are not started
# during the install (policy-rc.d); the tests never use them, they start their own
# servers on free loopback ports.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Each check: a Debian package and a test that succeeds when its files are present.
have_cmd() { PATH=$PATH:/usr/sbin:/sbin command -v "$1" >/dev/null 2>&1; }
have_glob() {
	local f
	for f in "$@"; do
		[[ -e $f ]] && return 0
	done
	return 1
}

have_mariadb() { have_cmd mariadbd || have_cmd mysqld; }

missing=()
check() { # check <package> <test...>
	local pkg=$1
	shift
	if ! "$@"; then
		missing+=("$pkg")
	fi
}
check redis-server have_cmd redis-server
check redis-tools have_cmd redis-cli
check zookeeper have_glob /usr/share/java/zookeeper*.jar /usr/share/zookeeper/lib/zookeeper*.jar /usr/share/zookeeper/zookeeper*.jar
check postgresql have_glob /usr/lib/postgresql/*/bin/postgres
check mariadb-server have_mariadb
check default-jre-headless have_cmd java
pkgs=("${missing[@]}")

installed="none"
if ((${#pkgs[@]} > 0)); then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "install.sh: missing ${pkgs[*]}, and apt-get is not available; install them by hand" >&2
		exit 1
	fi
	sudo=()
	if ((EUID != 0)); then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "install.sh: missing ${pkgs[*]}; run as root (or install sudo)" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
	# Keep apt from starting the packages' services: the tests start their own.
	policy=/usr/sbin/policy-rc.d
	added_policy=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod 755 "$policy"
		added_policy=1
	fi
	cleanup() {
		if ((added_policy)); then
			"${sudo[@]}" rm -f "$policy"
		fi
	}
	trap cleanup EXIT
	echo "install.sh: installing ${pkgs[*]}"
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
	installed="${pkgs[*]}"
fi

etcd="no scripts/build-etcd.sh"
if [[ -f $root/scripts/build-etcd.sh ]]; then
	if ! out=$(bash "$root/scripts/build-etcd.sh" 2>&1); then
		printf '%s\n' "$out" >&2
		echo "install.sh: scripts/build-etcd.sh failed" >&2
		exit 1
	fi
	etcd=$(printf '%s\n' "$out" | tail -n1)
fi

echo "install.sh: servers present (redis-server, redis-cli, zookeeper, postgres, mariadbd, java); installed: $installed; $etcd"
