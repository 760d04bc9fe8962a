#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The switch's layers (docs/switch.md, "Inside the library"), measured as
# scripts/xref-count measures them: each file calls only files of the
# layers below its own, never one beside it or above.  What a lower layer
# must tell an upper one goes through a table it was given (the ports'
# struct sw_port_ops, the hooks of struct sw_hooks, the loop's hooks), so
# direct rings and timed mode are reached from below only that way, and
# the counters, fault injection and the capture are leaves.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/switch
fail=0
say() { if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

# From the bottom; files of one line are beside each other.
layers=(
    "loop.c unixfd.c"
    "stats.c faults.c pcap.c"
    "port.c"
    "router.c"
    "direct.c timed.c"
    "core.c"
    "control.c"
    "main.c ctl.c"
)
# Headers with inline functions any layer may call.
headers=" switch.h switch-internal.h "

edges=$(python3 "$root/scripts/xref-count" "$dir" | awk '$2 == "->" {print $1, $3}')
[ -n "$edges" ]
say $? "xref-count lists the switch's edges"

declare -A rank=()
for i in "${!layers[@]}"; do
    for f in ${layers[$i]}; do
        rank[$f]=$i
    done
done

unplaced=""
for f in "$dir"/*.c; do
    f=${f##*/}
    [ -n "${rank[$f]:-}" ] || unplaced="$unplaced $f"
done
[ -z "$unplaced" ]
say $? "every file of switch/ has a layer here (without one:${unplaced:- none})"

# callees FILE: the files FILE calls into.
callees() { awk -v f="$1" '$1 == f {print $2}' <<<"$edges" | sort -u | tr '\n' ' '; }

only() {
    local file=$1; shift
    local allowed=${*:-nothing} bad="" c
    for c in $(callees "$file"); do
        case " $* " in *" $c "*) ;; *) bad="$bad $c" ;; esac
    done
    [ -z "$bad" ]
    say $? "$file calls only into: $allowed (extra:${bad:- none})"
}

# The leaves, and the layers reached from below only through tables.
only stats.c
only faults.c
only pcap.c
only loop.c
only unixfd.c
only port.c loop.c unixfd.c stats.c
only direct.c loop.c unixfd.c port.c

up=""
while read -r a b; do
    [ -n "$a" ] || continue
    [[ "$headers" == *" $b "* ]] && continue
    if [ -z "${rank[$a]:-}" ] || [ -z "${rank[$b]:-}" ] ||
       [ "${rank[$b]}" -ge "${rank[$a]}" ]; then
        up="$up $a->$b"
    fi
done <<<"$edges"
[ -z "$up" ]
say $? "every call goes to a layer below the caller's (up or beside:${up:- none})"

mutual=$(while read -r a b; do
             [[ "$a" < "$b" ]] || continue
             grep -qx "$b $a" <<<"$edges" && printf ' %s<->%s' "$a" "$b"
         done <<<"$edges")
[ -z "$mutual" ]
say $? "no two files call each other (found:${mutual:- none})"
exit "$fail"
