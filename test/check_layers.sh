#!/bin/sh
# Checks the include rules between grid's folders from the '#include "..."'
# lines of every .c and .h under the folders below (see "The folders are the
# architecture" in STYLE.md and "Broker internals" in ARCHITECTURE.md):
#
#   1. a folder includes only the folders its rule names (LAYERS);
#   2. no file of broker/ includes broker/broker.h but those that make the
#      server (BROKER_H_ALLOWED): a handler sees a narrow context, never
#      broker_t;
#   3. no circle of modules, a module being a .c and its same-named .h
#      (broker/api.c + broker/api.h = broker/api), module A depending on B
#      when A's .c or .h includes B's .h.
#
# An include is resolved as the compiler does with -I.: from the including
# file's folder, then from the tree's root. One that names no file of the
# folders below (a system header in quotes, a header under test/) is not
# looked at. Files over SIZE_LIMIT lines under SIZE_FOLDERS are warned of,
# and fail the check with --strict-size.
#
# usage: sh test/check_layers.sh [--list] [--strict-size] [ROOT]
#   --list         also print the modules' include graph, one edge a line
#                  with the files that make it
#   --strict-size  a file over SIZE_LIMIT lines is a violation
#   ROOT           the tree to check (default: the one holding this script)
#
# Prints one line per violation and a summary line; exit 0 when the tree
# keeps every rule, 1 when it breaks one, 2 on a usage error.

# The rules: each folder, then the folders it may include (its own first).
# backends/ may not include store/: no backend keeps state of its own.
LAYERS='
proto     proto
store     store proto
backends  backends proto
client    client proto
ha        ha proto
broker    broker proto store backends client ha
agent     agent proto store backends client
cli       cli proto store backends client
relay     relay proto store backends client
'

# The files of broker/ that may include the server's headers (broker/broker.h
# and broker/broker_int.h, its struct): the server's own rooms, main, and
# the cluster's runner, which starts and stops the server as main does
# (broker/broker.h only).
BROKER_H_ALLOWED='broker/broker.c broker/broker_pass.c broker/broker_agents.c'
BROKER_H_ALLOWED="$BROKER_H_ALLOWED broker/broker_clients.c broker/broker_restore.c"
BROKER_H_ALLOWED="$BROKER_H_ALLOWED broker/broker_int.h broker/main.c broker/broker.h"
BROKER_H_ALLOWED="$BROKER_H_ALLOWED broker/cluster.c broker/broker_blobs.c"

# A file under these folders over SIZE_LIMIT lines is warned of.
SIZE_FOLDERS='broker agent proto'
SIZE_LIMIT=2000

# At most this many circles are printed (their number is always given).
MAX_CIRCLES=200

set -u
list=0
strict_size=0
root=
for arg in "$@"; do
    case $arg in
    --list) list=1 ;;
    --strict-size) strict_size=1 ;;
    -h | --help)
        sed -n '/^# usage:/,/usage error\.$/p' "$0" | sed 's/^# \{0,1\}//'
        exit 0 ;;
    -*) echo "check_layers: unknown option $arg" >&2; exit 2 ;;
    *)
        [ -z "$root" ] || { echo "check_layers: one ROOT only" >&2; exit 2; }
        root=$arg ;;
    esac
done
[ -n "$root" ] || root=$(dirname "$0")/..
cd "$root" 2>/dev/null || { echo "check_layers: no tree at $root" >&2; exit 2; }

folders=$(echo "$LAYERS" | awk 'NF { print $1 }')
present=
for f in $folders; do
    [ -d "$f" ] && present="$present $f"
done
files=$(mktemp) || exit 2
trap 'rm -f "$files"' EXIT
# shellcheck disable=SC2086
[ -z "$present" ] || find $present -type f \( -name '*.c' -o -name '*.h' \) |
    LC_ALL=C sort >"$files"

# The file list first (every file is known before any include is resolved),
# then each file; an empty file list still reaches END.
# shellcheck disable=SC2046
awk -v layers="$LAYERS" -v broker_h_allowed="$BROKER_H_ALLOWED" \
    -v size_folders="$SIZE_FOLDERS" -v size_limit="$SIZE_LIMIT" \
    -v strict_size="$strict_size" -v list="$list" \
    -v max_circles="$MAX_CIRCLES" -v listfile="$files" '
function folder_of(path) { sub(/\/.*/, "", path); return path }
function dir_of(path) {
    if (path !~ /\//) return ""
    sub(/\/[^\/]*$/, "", path)
    return path
}
# The private header X_int.h (shared by the files X*.c) is part of X.
function module_of(path) {
    sub(/\.[ch]$/, "", path)
    sub(/_int$/, "", path)
    return path
}
# "broker/../proto/./pv.h" -> "proto/pv.h"; "" when it leaves the tree.
function normalize(path,    n, parts, i, depth, out) {
    n = split(path, parts, "/")
    depth = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == "..") {
            if (depth == 0) return ""
            depth--
            continue
        }
        stack[++depth] = parts[i]
    }
    out = ""
    for (i = 1; i <= depth; i++) out = out (i > 1 ? "/" : "") stack[i]
    return out
}
function resolve(from, inc,    d, p) {
    d = dir_of(from)
    p = normalize((d == "" ? "" : d "/") inc)
    if (p in known) return p
    p = normalize(inc)
    if (p in known) return p
    return ""
}
function may_list(f,    s, i, n, parts) {
    s = ""
    n = split(allowed_list[f], parts, " ")
    for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") parts[i] "/"
    return s
}
function violation(msg) { print msg; nviolations++ }
function node(m) {
    if (!(m in index_of)) { index_of[m] = ++nnodes; name[nnodes] = m }
    return index_of[m]
}
# Every elementary circle through start whose other modules come after
# start in node order, so each circle is found once, from its first module.
function walk(v, depth,    j) {
    path[depth] = v
    onpath[v] = 1
    for (j = 1; j <= nnodes && ncircles < max_circles; j++) {
        if (!((v, j) in adj)) continue
        if (j == start) {
            circle(depth)
        } else if (j > start && !onpath[j] && reach[j, start]) {
            walk(j, depth + 1)
        }
    }
    onpath[v] = 0
}
function circle(depth,    i, s) {
    ncircles++
    s = "circle:"
    for (i = 1; i <= depth; i++) s = s " " name[path[i]] " ->"
    print s " " name[path[1]]
}
BEGIN {
    n = split(layers, rows, "\n")
    for (i = 1; i <= n; i++) {
        m = split(rows[i], w, " ")
        if (m == 0) continue
        allowed_list[w[1]] = ""
        for (k = 2; k <= m; k++) {
            allowed[w[1], w[k]] = 1
            allowed_list[w[1]] = allowed_list[w[1]] (k > 2 ? " " : "") w[k]
        }
    }
    n = split(broker_h_allowed, w, " ")
    for (i = 1; i <= n; i++) may_see_broker[w[i]] = 1
    n = split(size_folders, w, " ")
    for (i = 1; i <= n; i++) size_folder[w[i]] = 1
    # Read the file list here, so the files themselves are the only input.
    while ((getline line < listfile) > 0) {
        known[line] = 1
        order[++nfiles] = line
        node(module_of(line))
    }
    close(listfile)
}
FNR == 1 { lines[FILENAME] = 0 }
{ lines[FILENAME] = FNR }
/^[ \t]*#[ \t]*include[ \t]*"/ {
    inc = $0
    sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
    if (inc !~ /"/) next
    sub(/".*/, "", inc)
    target = resolve(FILENAME, inc)
    if (target == "") next
    nincludes++
    from = folder_of(FILENAME)
    to = folder_of(target)
    if (!((from, to) in allowed)) {
        violation(FILENAME " includes " target ": " from "/ may include only " \
                  may_list(from))
        nfolder++
    }
    if ((target == "broker/broker.h" || target == "broker/broker_int.h") && \
        from == "broker" && !(FILENAME in may_see_broker)) {
        violation(FILENAME " includes " target ": a handler may not see " \
                  "broker_t")
        nbroker_h++
    }
    a = node(module_of(FILENAME))
    b = node(module_of(target))
    if (a != b) {
        adj[a, b] = 1
        if (!((a, b) in via)) via[a, b] = FILENAME
        else if (index(" " via[a, b] " ", " " FILENAME " ") == 0)
            via[a, b] = via[a, b] " " FILENAME
    }
}
END {
    # Which module reaches which (a closure over at most a few hundred
    # modules), so the search for circles keeps to modules that lead back.
    for (i = 1; i <= nnodes; i++)
        for (j = 1; j <= nnodes; j++)
            if ((i, j) in adj) reach[i, j] = 1
    for (k = 1; k <= nnodes; k++)
        for (i = 1; i <= nnodes; i++) {
            if (!reach[i, k]) continue
            for (j = 1; j <= nnodes; j++)
                if (reach[k, j]) reach[i, j] = 1
        }
    ncircles = 0
    for (start = 1; start <= nnodes && ncircles < max_circles; start++)
        if (reach[start, start]) walk(start, 1)
    if (ncircles >= max_circles)
        print "circle: the search stopped at " max_circles "; there may be more"
    for (i = 1; i <= nfiles; i++) {
        f = order[i]
        if (!(folder_of(f) in size_folder) || lines[f] <= size_limit) continue
        nlarge++
        if (strict_size == 1)
            violation(f " has " lines[f] " lines: over " size_limit)
        else
            print "warning: " f " has " lines[f] " lines: over " size_limit
    }
    if (list == 1) {
        print "--- layers (a folder: the folders it may include)"
        nl = split(layers, rows, "\n")
        for (i = 1; i <= nl; i++) {
            m = split(rows[i], w, " ")
            if (m > 0) print w[1] "/: " may_list(w[1])
        }
        print "--- module graph (module -> module it includes: the files)"
        nedges = 0
        for (i = 1; i <= nnodes; i++)
            for (j = 1; j <= nnodes; j++)
                if ((i, j) in adj) {
                    print name[i] " -> " name[j] ": " via[i, j]
                    nedges++
                }
        print "--- " nnodes " modules, " nedges " edges"
    }
    failed = nviolations + ncircles
    summary = "check_layers: " nfiles + 0 " files, " nincludes + 0 \
        " includes; " nfolder + 0 " across folders, " nbroker_h + 0 \
        " of broker.h, " ncircles + 0 (ncircles >= max_circles ? "+" : "") \
        " circles, " nlarge + 0 " files over " size_limit " lines" \
        (strict_size == 1 ? "" : " (warnings)")
    print summary (failed > 0 ? ": FAIL" : ": ok")
    exit (failed > 0 ? 1 : 0)
}
' $(cat "$files") </dev/null
