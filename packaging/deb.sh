#!/bin/sh
# make deb: the Debian packages grid-broker, grid-agent, grid-relay,
# grid-cli and python3-grid, built the Debian way (debhelper: dh, with
# shlibs and systemd handled by dh_shlibdeps and dh_installsystemd) in a
# copy of the tree under BUILD/deb, so the source tree gets no debian/
# debris.
# The copy keeps the objects `make` already built. Then lintian checks
# them; an error fails (warnings are printed).
#
# usage: sh packaging/deb.sh BUILD
set -eu
build=${1:-build}
out=$(mkdir -p "$build/deb" && cd "$build/deb" && pwd)
src="$out/src"
rm -rf "$src" "$out"/*.deb
mkdir -p "$src"
# The copy has no git history: --version's commit is read here
GRID_COMMIT=${GRID_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
export GRID_COMMIT
# The sources, then the build directory with its timestamps
tar --exclude=./build --exclude=./build-asan --exclude=./.git \
    --exclude='./build-*' -cf - . | tar -C "$src" -xf -
if [ -d "$build" ] && [ "$build" = build ]; then
    mkdir -p "$src/build"
    (cd build && tar --exclude=./deb -cf - .) | tar -C "$src/build" -xf -
fi
cd "$src"
fakeroot debian/rules binary DEB_OUT="$out" >"$out/build.log" 2>&1 || {
    tail -n 40 "$out/build.log" >&2
    echo "deb: the package build failed (log: $out/build.log)" >&2
    exit 1
}
cd "$out"
ls -1 *.deb
lintian --no-tag-display-limit *.deb >"$out/lintian.log" 2>&1 || true
cat "$out/lintian.log"
if grep -q '^E: ' "$out/lintian.log"; then
    echo "deb: lintian found errors" >&2
    exit 1
fi
