#!/bin/bash
# gridcli's bash completion, as bash calls it: COMP_WORDS split the way
# readline splits them (COMP_WORDBREAKS: node:web-01 is three words),
# COMP_LINE and COMP_POINT, then COMPREPLY checked. A fake gridcli on PATH
# answers `node list` and `job list` with tables like the real one's and
# logs how it was called.
#
# usage: bash test/completion.bash COMPLETION_FILE [BASH_COMPLETION_FILE]
# With BASH_COMPLETION_FILE (bash-completion's bash_completion) it runs on
# bash-completion's helpers, else on the file's own fallback.
set -u
completion=$1
helpers=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grid-compl-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0

mkdir "$tmp/bin"
cat >"$tmp/bin/gridcli" <<'EOF'
#!/bin/sh
echo "$*" >>"$GRID_FAKE_LOG"
case "$*" in
    *"node list"*)
        cat <<'TABLE'
ID      HOSTNAME  STATUS   GROUPS   LABELS                LAST-SEEN             RUNNING
db-01   db-01     online   db       tier=db.prod          2026-12-02 16:00:00Z  0/4
web-01  web-01    online   web,ops  tier=web.prod,zone=a  2026-12-02 16:00:00Z  1/4
web-02            offline  web      -                     2026-12-01 09:00:00Z  0/4
TABLE
        ;;
    *"job list"*)
        cat <<'TABLE'
ID                   TARGET        STATUS     STEP  NODES  CREATED
j-0193a1b2c3d4-0002  node:web-01   running    0/1   1      2026-12-02 16:00:01Z
j-0193a1b2c3d4-0001  group:web     completed  1/1   2      2026-12-02 15:59:00Z
2 of 7 jobs shown (use --limit N or --status S)
TABLE
        ;;
    *) exit 1 ;;
esac
EOF
chmod +x "$tmp/bin/gridcli"
PATH="$tmp/bin:$PATH"
export GRID_FAKE_LOG="$tmp/calls"
: >"$GRID_FAKE_LOG"

if [ -n "$helpers" ]; then
    # bash_completion wants an interactive-ish shell; only its functions
    # are used here
    # shellcheck disable=SC1090
    . "$helpers" || { echo "cannot source $helpers"; exit 1; }
    declare -F _init_completion >/dev/null || { echo "no _init_completion in $helpers"; exit 1; }
fi
# shellcheck disable=SC1090
. "$completion"
if [ -z "$helpers" ] && declare -F _init_completion >/dev/null; then
    echo "_init_completion is defined: the fallback would not run"
    exit 1
fi

compopt() { :; }   # no completion is running: nothing to set

# Completes LINE (the cursor at its end) as bash would: prints COMPREPLY,
# one a line, sorted.
complete_line() {
    local line=$1 word="" c i
    COMP_WORDS=()
    local breaks=${COMP_WORDBREAKS//[[:blank:]]/}
    local in_break=false
    for ((i = 0; i < ${#line}; i++)); do
        c=${line:i:1}
        if [[ $c == [[:blank:]] ]]; then
            [[ -n $word ]] && COMP_WORDS+=("$word")
            word=""
            in_break=false
        elif [[ $breaks == *"$c"* ]]; then
            # a run of break characters is a word of its own
            if ! $in_break; then
                [[ -n $word ]] && COMP_WORDS+=("$word")
                word=""
            fi
            word+=$c
            in_break=true
        else
            if $in_break; then
                COMP_WORDS+=("$word")
                word=""
            fi
            word+=$c
            in_break=false
        fi
    done
    if [[ -n $word ]]; then
        COMP_WORDS+=("$word")
    else
        COMP_WORDS+=("")
    fi
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE=$line
    COMP_POINT=${#line}
    COMPREPLY=()
    _gridcli gridcli "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sort
}

expect() {
    local line=$1 want got
    shift
    want=$(printf '%s\n' "$@" | sort)
    got=$(complete_line "$line")
    if [ "$got" != "$want" ]; then
        echo "'$line<TAB>': expected [$(echo $want)], got [$(echo $got)]"
        failed=1
    fi
}

# The words bash makes of a target (a check of this test's own splitting)
complete_line "gridcli job run --target node:" >/dev/null
[ "${COMP_WORDS[*]}" = "gridcli job run --target node :" ] \
    || { echo "split: ${COMP_WORDS[*]}"; failed=1; }

# A target: its kinds, then what the broker knows, without the part
# before the colon (readline keeps it)
expect "gridcli job run --target " all any any: fact: group: label: node:
expect "gridcli node list --where g" group:
expect "gridcli node list --w" --where
expect "gridcli job run --target no" node:
expect "gridcli job run --target node:" db-01 web-01 web-02
expect "gridcli job run --target node:we" web-01 web-02
expect "gridcli job run --target node:web-01,w" web-01,web-01 web-01,web-02
expect "gridcli job run --target group:" db ops web
expect "gridcli job run --target label:tier=w" web.prod
expect "gridcli job run --target any:node:d" db-01
expect "gridcli job run --target=node:db" db-01
expect "gridcli job retry j-1 --target group:o" ops
# Job ids, from the recent jobs
expect "gridcli job output " j-0193a1b2c3d4-0001 j-0193a1b2c3d4-0002
expect "gridcli job output j-0193a1b2c3d4-000" j-0193a1b2c3d4-0001 j-0193a1b2c3d4-0002
expect "gridcli job status j-0193a1b2c3d4-0002" j-0193a1b2c3d4-0002
expect "gridcli dlq list --job " j-0193a1b2c3d4-0001 j-0193a1b2c3d4-0002
expect "gridcli job output j-0193a1b2c3d4-0001 --node w" web-01 web-02
expect "gridcli node info d" db-01
# The audit trail: its command, its flags and their values
expect "gridcli au" audit
expect "gridcli audit " list
expect "gridcli audit list --w" --who
expect "gridcli audit list --o" --object --outcome --output
expect "gridcli audit list --outcome re" refused
expect "gridcli audit list --type job.c" job.cancel
expect "gridcli audit list --object we" web-01 web-02
expect "gridcli audit list --who alice --j" --json
# Job notifications: the command, its flags and their values
expect "gridcli no" node notify
expect "gridcli notify " list retry
expect "gridcli notify list --s" --status
expect "gridcli notify list --status " pending sent dead
expect "gridcli job run --no" --notify
# Commands and flags still complete as before
expect "gridcli jo" job
expect "gridcli job o" output
expect "gridcli job output j-0193a1b2c3d4-0001 --st" --stderr --step
expect "gridcli job output j-0193a1b2c3d4-0001 --f" --follow
expect "gridcli job run --wait --fo" --follow

# The line's own broker (host:port is one word to gridcli) and a short
# request timeout reach gridcli
: >"$GRID_FAKE_LOG"
expect "gridcli --broker tcp://10.0.0.9:7701 job cancel j-0193a1b2c3d4-0001" j-0193a1b2c3d4-0001
grep -qx -- "--broker tcp://10.0.0.9:7701 --request-timeout 1s job list --limit 100" "$GRID_FAKE_LOG" \
    || { echo "gridcli was called as: $(cat "$GRID_FAKE_LOG")"; failed=1; }

# No broker: nothing offered, nothing printed
mv "$tmp/bin/gridcli" "$tmp/bin/gridcli.off"
printf '#!/bin/sh\necho "gridcli: no answer" >&2\nexit 3\n' >"$tmp/bin/gridcli"
chmod +x "$tmp/bin/gridcli"
expect "gridcli job run --target node:"

exit $failed
