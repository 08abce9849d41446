#!/bin/sh
# The operations side, checked the way an operator meets it: the man
# pages name every flag that --help prints, the systemd units pass
# `systemd-analyze verify`, `make install` writes what it should (and
# `make uninstall` takes it away again), and `make deb` builds packages
# that lintian passes and whose programs run from a throwaway root.
#
# usage: sh test/packaging.sh SRC_DIR BUILD_DIR [SANITIZE]
# (SANITIZE as the build was made, so that make install and make deb use
# the programs in BUILD_DIR instead of building them again without it)
# Prints cmocka-style lines, so test/run_tests.sh counts each check.
set -u
src=$1
build=$2
sanitize=${3:-}
bin="$build/bin"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grid-pkg-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

check() {
    name=$1
    shift
    echo "[ RUN      ] $name"
    if "$@" >"$tmp/log" 2>&1; then
        passed=$((passed + 1))
        echo "[       OK ] $name"
    else
        failed=$((failed + 1))
        sed 's/^/    /' "$tmp/log" | tail -n 40
        echo "[  FAILED  ] $name"
    fi
}

# Every --flag in a help text must appear in the man page.
flags_in_page() {
    page=$1
    shift
    "$@" 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u >"$tmp/flags"
    [ -s "$tmp/flags" ] || { echo "no flags in: $*"; return 1; }
    missing=""
    while read -r flag; do
        grep -q -- "$flag\b" "$page" || missing="$missing $flag"
    done <"$tmp/flags"
    if [ -n "$missing" ]; then
        echo "'$*' prints flags that $page does not document:$missing"
        echo "(add each to the man page's OPTIONS; see docs/man)"
        return 1
    fi
}

man_pages_cover_every_flag() {
    man="$src/docs/man"
    flags_in_page "$man/gridbroker.8.scd" "$bin/gridbroker" --help &&
    flags_in_page "$man/gridbroker.8.scd" "$bin/gridbroker" keygen --help &&
    flags_in_page "$man/gridagent.8.scd" "$bin/gridagent" --help &&
    flags_in_page "$man/gridagent.8.scd" "$bin/gridagent" keygen --help &&
    flags_in_page "$man/gridrelay.8.scd" "$bin/gridrelay" --help &&
    flags_in_page "$man/gridrelay.8.scd" "$bin/gridrelay" keygen --help &&
    flags_in_page "$man/gridcli.1.scd" "$bin/gridcli" --help &&
    flags_in_page "$man/gridcli.1.scd" "$bin/gridcli" keygen --help || return 1
    for topic in $("$bin/gridcli" --help | sed -n 's/^  help \[\(.*\)\]$/\1/p' | tr '|' ' '); do
        flags_in_page "$man/gridcli.1.scd" "$bin/gridcli" help "$topic" || return 1
    done
}

man_pages_build() {
    for page in "$src"/docs/man/*.scd; do
        scdoc <"$page" >"$tmp/page" || { echo "scdoc: $page"; return 1; }
        # man renders it without a warning
        out=$(MANWIDTH=80 man --warnings -l "$tmp/page" 2>&1 >/dev/null)
        [ -z "$out" ] || { echo "$page: $out"; return 1; }
    done
}

units_verify() {
    root="$tmp/units"
    mkdir -p "$root/etc/grid"
    cp "$src"/conf/*.yaml "$root/etc/grid/"
    for page in "$build"/man/*; do
        section=${page##*.}
        mkdir -p "$root/man/man$section"
        cp "$page" "$root/man/man$section/"
    done
    for unit in gridbroker gridagent gridrelay; do
        sed -e "s|@sbindir@|$bin|g" -e "s|@sysconfdir@|$root/etc|g" \
            "$src/packaging/systemd/$unit.service.in" >"$root/$unit.service"
    done
    MANPATH="$root/man" SYSTEMD_LOG_LEVEL=notice \
        systemd-analyze verify "$root/gridbroker.service" "$root/gridagent.service" \
        "$root/gridrelay.service" \
        >"$root/verify.log" 2>&1
    rc=$?
    cat "$root/verify.log"
    [ "$rc" = 0 ] && ! [ -s "$root/verify.log" ]
}

install_and_uninstall() {
    dest="$tmp/dest"
    make -s -C "$src" BUILD="$build" SANITIZE="$sanitize" install PREFIX=/usr DESTDIR="$dest" >/dev/null || return 1
    for f in usr/sbin/gridbroker usr/sbin/gridagent usr/bin/gridcli \
        usr/sbin/gridrelay etc/grid/gridrelay.yaml \
        lib/systemd/system/gridrelay.service usr/share/man/man8/gridrelay.8 \
        etc/grid/gridbroker.yaml etc/grid/gridagent.yaml etc/grid/gridcli.yaml \
        lib/systemd/system/gridbroker.service lib/systemd/system/gridagent.service \
        usr/share/man/man1/gridcli.1 usr/share/man/man8/gridbroker.8 \
        usr/share/man/man8/gridagent.8 usr/share/man/man5/grid-job.5 \
        usr/share/man/man5/grid.yaml.5 usr/share/man/man7/grid-protocol.7 \
        usr/share/bash-completion/completions/gridcli \
        usr/lib/python3/dist-packages/grid/__init__.py; do
        [ -e "$dest/$f" ] || { echo "make install did not write $f"; return 1; }
    done
    grep -q "^ExecStart=/usr/sbin/gridbroker --config /etc/grid/gridbroker.yaml$" \
        "$dest/lib/systemd/system/gridbroker.service" || { echo "unit paths not filled in"; return 1; }
    "$dest/usr/bin/gridcli" --version | grep -q . || return 1
    PYTHONPATH="$dest/usr/lib/python3/dist-packages" /usr/bin/python3 -c 'import grid' || return 1
    bash -n "$dest/usr/share/bash-completion/completions/gridcli" || return 1
    # A second install keeps a config the operator changed
    echo "# mine" >>"$dest/etc/grid/gridcli.yaml"
    make -s -C "$src" BUILD="$build" SANITIZE="$sanitize" install PREFIX=/usr DESTDIR="$dest" >/dev/null || return 1
    grep -q '^# mine$' "$dest/etc/grid/gridcli.yaml" || { echo "install replaced a changed config"; return 1; }
    make -s -C "$src" BUILD="$build" SANITIZE="$sanitize" uninstall PREFIX=/usr DESTDIR="$dest" >/dev/null || return 1
    left=$(cd "$dest" && find . -type f | sort)
    [ "$left" = "./etc/grid/gridcli.yaml" ] || { echo "uninstall left: $left"; return 1; }
}

debian_packages() {
    make -s -C "$src" BUILD="$build" SANITIZE="$sanitize" deb >"$tmp/deb.log" 2>&1 || { cat "$tmp/deb.log"; return 1; }
    # lintian clean: no error and no warning either
    if grep -E '^[EW]: ' "$build/deb/lintian.log"; then
        echo "lintian: the tags above"
        return 1
    fi
    root="$tmp/root"
    mkdir -p "$root"
    for deb in grid-broker grid-agent grid-cli grid-relay; do
        file=$(ls "$build"/deb/${deb}_*.deb) || return 1
        dpkg-deb -x "$file" "$root" || return 1
        dpkg-deb -f "$file" Depends | grep -q 'libzmq5' || { echo "$deb: no shlibs depends"; return 1; }
    done
    dpkg-deb -x "$build"/deb/python3-grid_*_all.deb "$root" || return 1
    dpkg-deb --ctrl-tarfile "$build"/deb/grid-broker_*.deb | tar -xOf - ./conffiles \
        | grep -q '^/etc/grid/gridbroker.yaml$' || { echo "no conffile"; return 1; }
    "$root/usr/sbin/gridbroker" --version && "$root/usr/sbin/gridagent" --version &&
    "$root/usr/sbin/gridrelay" --version &&
    "$root/usr/bin/gridcli" --version || return 1
    PYTHONPATH="$root/usr/lib/python3/dist-packages" /usr/bin/python3 -c \
        'import grid; print("python3-grid", grid.__version__)'
}

# The packages installed into a throwaway root by dpkg itself (--root; the
# maintainer scripts run with DPKG_ROOT: --force-script-chrootless), then
# purged: purge takes away what the postinst made (keys, state, the grid
# user once no package needs it) and leaves nothing in the root but
# dpkg's own database. adduser, deluser and the systemd helpers cannot
# act on a root: stubs on PATH stand in for them, the users in a file of
# their own. The host's users, packages and units are checked unchanged.
install_and_purge() {
    root="$tmp/proot"
    stubs="$tmp/stubs"
    [ -n "$tmp" ] && [ -d "$tmp" ] || return 1
    GRID_FAKE_PASSWD="$tmp/passwd"
    GRID_FAKE_ROOT="$root"
    export GRID_FAKE_PASSWD GRID_FAKE_ROOT
    mkdir -p "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/info" "$stubs" || return 1
    : >"$root/var/lib/dpkg/status"
    : >"$GRID_FAKE_PASSWD"
    # adduser: as the real one, it warns about a --no-create-home home it
    # cannot see; the user goes to the file
    cat >"$stubs/adduser" <<'STUB'
#!/bin/sh
home="" user="" nocreate=false
while [ $# -gt 0 ]; do
    case $1 in
        --home) home=$2; shift ;;
        --gecos|--shell|--uid|--gid|--ingroup) shift ;;
        --no-create-home) nocreate=true ;;
        -*) ;;
        *) user=$1 ;;
    esac
    shift
done
if $nocreate && [ -n "$home" ] && [ ! -d "$GRID_FAKE_ROOT$home" ]; then
    echo "adduser: Warning: The home dir $home you specified can't be accessed: No such file or directory" >&2
fi
echo "$user:x:999:999::$home:/usr/sbin/nologin" >>"$GRID_FAKE_PASSWD"
echo "group $user" >>"$GRID_FAKE_PASSWD"
STUB
    cat >"$stubs/deluser" <<'STUB'
#!/bin/sh
for user; do :; done
grep -v "^$user:" "$GRID_FAKE_PASSWD" >"$GRID_FAKE_PASSWD.new"
mv "$GRID_FAKE_PASSWD.new" "$GRID_FAKE_PASSWD"
STUB
    cat >"$stubs/delgroup" <<'STUB'
#!/bin/sh
for group; do :; done
grep -v "^group $group$" "$GRID_FAKE_PASSWD" >"$GRID_FAKE_PASSWD.new"
mv "$GRID_FAKE_PASSWD.new" "$GRID_FAKE_PASSWD"
STUB
    cat >"$stubs/getent" <<'STUB'
#!/bin/sh
case $1 in
    passwd) grep "^$2:" "$GRID_FAKE_PASSWD" ;;
    group) grep "^group $2$" "$GRID_FAKE_PASSWD" ;;
    *) exit 2 ;;
esac
STUB
    # chown to a user the file does not hold fails, as it would
    cat >"$stubs/chown" <<'STUB'
#!/bin/sh
grep -q "^${1%%:*}:" "$GRID_FAKE_PASSWD" || { echo "chown: invalid user: '$1'" >&2; exit 1; }
STUB
    for helper in systemctl deb-systemd-helper deb-systemd-invoke; do
        printf '#!/bin/sh\nexit 0\n' >"$stubs/$helper"
    done
    chmod +x "$stubs/adduser" "$stubs/deluser" "$stubs/delgroup" "$stubs/getent" \
        "$stubs/chown" "$stubs/systemctl" "$stubs/deb-systemd-helper" \
        "$stubs/deb-systemd-invoke" || return 1
    host_state() {
        cat /etc/passwd /etc/group /var/lib/dpkg/status 2>/dev/null | md5sum
        ls -la /var/lib/systemd/deb-systemd-helper-enabled /etc/systemd/system \
            /etc/grid /var/lib/grid 2>&1 | md5sum
    }
    before=$(host_state)
    debs=""
    for deb in grid-broker grid-agent grid-cli grid-relay; do
        file=$(ls "$build"/deb/${deb}_*.deb) || return 1
        debs="$debs $file"
    done
    # Run outside a chroot, a maintainer script that names /etc or /var
    # without $DPKG_ROOT would act on this host: refuse to run it
    for file in $debs; do
        rm -rf "$tmp/ctrl" && dpkg-deb -e "$file" "$tmp/ctrl" || return 1
        for script in "$tmp"/ctrl/preinst "$tmp"/ctrl/postinst "$tmp"/ctrl/prerm "$tmp"/ctrl/postrm; do
            [ -e "$script" ] || continue
            if grep -v '^ *#' "$script" | grep -E '(^|[^}T])/(etc|var)/' | grep -v -e '--home /var/lib/grid'; then
                echo "$(basename "$file") $(basename "$script"): paths without \$DPKG_ROOT (above)"
                return 1
            fi
        done
    done
    in_root() {
        PATH="$stubs:$PATH" dpkg --root="$root" --force-script-chrootless \
            --force-depends --log="$tmp/dpkg.log" "$@" >>"$tmp/dpkg.out" 2>&1 || {
            cat "$tmp/dpkg.out"
            return 1
        }
    }
    warned() {
        if grep -i -e 'warning' -e "can't be accessed" "$tmp/dpkg.out" |
            grep -v -e '--force' -e 'dependency problems'; then
            echo "dpkg -i printed the warnings above"
            return 0
        fi
        return 1
    }
    nothing_left() {
        [ ! -s "$GRID_FAKE_PASSWD" ] || { echo "users left:"; cat "$GRID_FAKE_PASSWD"; return 1; }
        left=$(cd "$root" && find . -mindepth 1 ! -path ./var ! -path ./var/lib \
            ! -path ./var/lib/dpkg ! -path './var/lib/dpkg/*' | sort)
        [ -z "$left" ] || { echo "the purge left:"; echo "$left"; return 1; }
    }
    # The relay alone makes the user too, and takes it with it
    in_root -i "$(ls "$build"/deb/grid-relay_*.deb)" || return 1
    ! warned || return 1
    grep -q '^grid:' "$GRID_FAKE_PASSWD" || { echo "grid-relay made no grid user"; return 1; }
    in_root --purge grid-relay || return 1
    nothing_left || return 1
    # All four
    # shellcheck disable=SC2086
    in_root -i $debs || return 1
    ! warned || return 1
    for f in etc/grid/keys/broker.key etc/grid/keys/broker.key_secret \
        etc/grid/keys/agent.key etc/grid/keys/agent.key_secret \
        etc/grid/keys/relay.key etc/grid/keys/relay.key_secret \
        etc/grid/gridbroker.yaml var/lib/grid/broker var/lib/grid/agent; do
        [ -e "$root/$f" ] || { echo "the install did not make $f"; return 1; }
    done
    grep -q '^grid:' "$GRID_FAKE_PASSWD" || { echo "no grid user made"; return 1; }
    # Something in the agent's spool and the broker's store, as on a
    # system that ran
    echo spooled >"$root/var/lib/grid/agent/result" &&
    echo stored >"$root/var/lib/grid/broker/data.mdb" || return 1
    # The broker purged, the relay still here: the user stays
    in_root --purge grid-broker || return 1
    [ ! -e "$root/etc/grid/keys/broker.key_secret" ] && [ ! -e "$root/var/lib/grid/broker" ] &&
    [ ! -e "$root/etc/grid/gridbroker.yaml" ] ||
        { echo "purging grid-broker left its key, store or config"; return 1; }
    [ -e "$root/etc/grid/keys/relay.key_secret" ] ||
        { echo "purging grid-broker took the relay's key"; return 1; }
    grep -q '^grid:' "$GRID_FAKE_PASSWD" ||
        { echo "the grid user went while grid-relay needs it"; return 1; }
    # Removed, not purged: keys, spool and user stay
    in_root --remove grid-relay grid-agent || return 1
    [ -e "$root/etc/grid/keys/relay.key_secret" ] && [ -e "$root/var/lib/grid/agent/result" ] &&
    grep -q '^grid:' "$GRID_FAKE_PASSWD" ||
        { echo "a remove (not a purge) took keys, spool or the user"; return 1; }
    in_root --purge grid-relay grid-agent grid-cli || return 1
    nothing_left || return 1
    [ "$(host_state)" = "$before" ] || { echo "the host's users, packages or units changed"; return 1; }
}

# gridcli's bash completion: targets (node:, group:, label:) across the
# colon word break, job ids and node ids from the broker, with
# bash-completion's helpers and without them (test/completion.bash).
bash_completion() {
    helpers=/usr/share/bash-completion/bash_completion
    [ -r "$helpers" ] || { echo "no $helpers: install bash-completion (make test-deps)"; return 1; }
    echo "with bash-completion:" &&
    bash "$src/test/completion.bash" "$src/packaging/completion/gridcli" "$helpers" &&
    echo "without:" &&
    bash "$src/test/completion.bash" "$src/packaging/completion/gridcli"
}

# --print-config names every key of the example config, and says where
# each value came from: a flag, the file, or the default.
print_config_names_every_key() {
    for prog in gridbroker gridagent gridrelay; do
        printf 'verbose: true\n' >"$tmp/$prog.yaml"
        "$bin/$prog" --config "$tmp/$prog.yaml" --log-level warn --print-config \
            >"$tmp/$prog.out" || { echo "$prog --print-config failed"; return 1; }
        for key in $(grep -oE '^(# ?)?[a-z_]+:' "$src/conf/$prog.yaml" | sed 's/^# \{0,1\}//; s/:$//'); do
            grep -qE "^$key(\.[a-z_]+)?: " "$tmp/$prog.out" \
                || { echo "$prog --print-config does not show $key"; return 1; }
        done
        grep -qE '^verbose: true +# file '"$tmp/$prog.yaml"'$' "$tmp/$prog.out" \
            || { echo "$prog: verbose is not from the file"; cat "$tmp/$prog.out"; return 1; }
        grep -qE '^log_level: "warn" +# flag --log-level$' "$tmp/$prog.out" \
            || { echo "$prog: log_level is not from the flag"; return 1; }
        grep -qE '^log_format: "text" +# default$' "$tmp/$prog.out" \
            || { echo "$prog: log_format is not the default"; return 1; }
    done
    printf 'output: json\n' >"$tmp/gridcli.yaml"
    GRID_BROKER=tcp://127.0.0.9:7701 "$bin/gridcli" --config "$tmp/gridcli.yaml" \
        --request-timeout 2s --print-config >"$tmp/gridcli.out" \
        || { echo "gridcli --print-config failed"; return 1; }
    for key in $(grep -oE '^(# ?)?[a-z_]+:' "$src/conf/gridcli.yaml" | sed 's/^# \{0,1\}//; s/:$//'); do
        grep -qE "^$key: " "$tmp/gridcli.out" \
            || { echo "gridcli --print-config does not show $key"; return 1; }
    done
    grep -qE '^broker: "tcp://127.0.0.9:7701" +# env GRID_BROKER$' "$tmp/gridcli.out" &&
    grep -qE '^output: "json" +# file ' "$tmp/gridcli.out" &&
    grep -qE '^request_timeout: "2s" +# flag --request-timeout$' "$tmp/gridcli.out" \
        || { echo "gridcli: wrong origins"; cat "$tmp/gridcli.out"; return 1; }
}

check man_pages_cover_every_flag man_pages_cover_every_flag
check print_config_names_every_key print_config_names_every_key
check man_pages_build man_pages_build
check units_verify units_verify
check install_and_uninstall install_and_uninstall
check debian_packages debian_packages
check install_and_purge install_and_purge
check bash_completion bash_completion
echo "[  PASSED  ] $passed test(s)."
[ "$failed" != 0 ] && echo "[  FAILED  ] $failed test(s), listed above."
[ "$failed" = 0 ]
