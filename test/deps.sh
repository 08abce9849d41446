#!/bin/sh
# Installs the Debian packages grid needs that are missing (as root), or
# prints the apt-get line to run (as anyone else). Arguments: package names.
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "grid needs these Debian packages:$missing" >&2
    echo "run as root:  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "installing:$missing"
# A machine that has never fetched package lists needs them first.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e '^lock$' -e '^partial$' -e '^auxfiles$')" ]; then
    apt-get update -qq || { echo "apt-get update failed" >&2; exit 1; }
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; } \
    || { echo "apt-get install failed for:$missing" >&2; exit 1; }
