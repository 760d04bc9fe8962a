#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/lib.sh arctic_on_exit and arctic_leave_run_dir, the one teardown
# of niu-cluster, niu-cluster-host and niu-bench: a script that exits
# normally, fails, or is sent TERM or HUP runs its teardown once, keeps
# its exit status (143 and 129 for the signals), stops its children, and
# removes its run directory unless told to keep it, then says where it is.
set -euo pipefail
lib="$(dirname "$0")/../../scripts/lib.sh"
lib=$(cd "$(dirname "$lib")" && pwd)/lib.sh

base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
. "$(dirname "$0")/check.sh"

# A script in the shape of the three: a child, a run directory, a
# teardown; $1: how it ends (exit N, or wait for a signal), $2: keep.
cat >"$base/script" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
. "$lib"
keep=\$2
run=\$(mktemp -d "$base/run.XXXXXX")
sleep 60 &
child=\$!
teardown() {
    echo "teardown \$child" >>"$base/log"
    arctic_stop_children "\$child"
    arctic_leave_run_dir "\$run" "\$keep"
}
arctic_on_exit teardown
echo "\$child" >"$base/child"
case "\$1" in
    wait) while :; do sleep 0.1; done ;;
    *) exit "\$1" ;;
esac
SCRIPT
chmod +x "$base/script"

# Runs the script, ending it as $1 says (exit N or a signal's name);
# prints its status.
ends() {
    local how=$1 keep=$2 status=0
    rm -f "$base/log" "$base/child"
    rm -rf "$base"/run.*
    if [[ "$how" =~ ^[0-9]+$ ]]; then
        "$base/script" "$how" "$keep" 2>"$base/err" || status=$?
    else
        # The signal's default action restored first: a test run under
        # nohup (or by a runner that ignores HUP) would otherwise start the
        # script with HUP ignored, which no trap can undo.
        env --default-signal="$how" "$base/script" wait "$keep" 2>"$base/err" &
        local pid=$!
        for _ in $(seq 100); do
            [ -s "$base/child" ] && break
            sleep 0.05
        done
        kill "-$how" "$pid"
        wait "$pid" || status=$?
    fi
    echo "$status"
}

for how in 0 3 TERM HUP; do
    case "$how" in
        TERM) want=143 ;;
        HUP) want=129 ;;
        *) want=$how ;;
    esac
    check "ended by '$how': its status kept" "$(ends "$how" no)" "$want"
    check "ended by '$how': the teardown ran once" "$(wc -l <"$base/log")" 1
    child=$(cat "$base/child")
    if kill -0 "$child" 2>/dev/null; then
        check "ended by '$how': its child stopped" running stopped
        kill "$child"
    else
        check "ended by '$how': its child stopped" stopped stopped
    fi
    check "ended by '$how': its run directory removed" \
        "$(find "$base" -maxdepth 1 -name 'run.*' | wc -l)" 0
done

check "kept: the status still the script's" "$(ends 5 yes)" 5
kept=$(find "$base" -maxdepth 1 -name 'run.*')
check "kept: the run directory left" "$(echo "$kept" | grep -c .)" 1
check "kept: and said where" "$(cat "$base/err")" "==> run directory kept: $kept"

(. "$lib"; arctic_leave_run_dir "$base/x" yes "ARCTIC-HOST: kept on h:") >"$base/out"
check "kept: said with the caller's words on standard output" \
    "$(cat "$base/out")" "ARCTIC-HOST: kept on h: $base/x"
# The three scripts that start processes use it, and no trap of their own
# (niu-cluster-host's --receive-image cleans its temporary directory
# before anything starts, and exits).
scripts=$(cd "$(dirname "$lib")" && pwd)
for script in niu-cluster niu-cluster-host niu-bench; do
    check "$script tears down with arctic_on_exit" \
        "$(grep -c '^ *arctic_on_exit teardown$' "$scripts/$script")" 1
    check "$script sets no EXIT trap of its own" \
        "$(grep -v 'rm -rf "\$tmp"' "$scripts/$script" | grep -c "trap .* EXIT")" 0
done
exit "$fail"
