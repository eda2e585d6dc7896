#!/bin/bash
# The bash completion offers exactly what the command's --help texts list:
# its commands, each command's options, and run's --mode/--calibrator values.
# usage: completion_test.sh FASTCLOCK COMPLETION_SCRIPT
set -u
fastclock=$1 script=$2
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# shellcheck source=/dev/null
source "$script" || { echo "FAIL: cannot source $script"; exit 1; }

complete_line() {   # words of a command line, the last one being completed
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
    _fastclock
    printf '%s\n' "${COMPREPLY[@]}" | sort -u | grep -v '^$'
}
same() {            # what want got
    if [ "$2" = "$3" ]; then ok "$1: $(echo $2)"; else bad "$1: --help lists '$(echo $2)', completion offers '$(echo $3)'"; fi
}

# Commands: the names in the 'commands:' block of --help, and --help/--version.
cmds=$("$fastclock" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$cmds" ] || { echo "FAIL: no commands found in 'fastclock --help'"; exit 1; }
want=$( (echo "$cmds"; "$fastclock" --help | grep -oE -- '--(help|version)') | sort -u)
same "commands" "$want" "$(complete_line fastclock '')"

for cmd in $cmds; do
    # Options: those of the usage line and the option lines of '<command> --help',
    # and --help ('fastclock <command> --help' in the top-level help).
    want=$( ("$fastclock" "$cmd" --help | grep -E -- '^usage:|^ {1,4}-' |
                 grep -oE -- '(^|[ [,|])--?[a-z][a-z-]*' | sed 's/^[ [,|]//'
             "$fastclock" --help | grep -q -- 'fastclock <command> --help' && echo --help) | sort -u)
    got=$(complete_line fastclock "$cmd" - | grep -vx -- '--')
    same "$cmd options" "$want" "$got"
done

# Values of run's options: 'auto|tsc|...' after the option name in run --help.
for o in --mode --calibrator; do
    want=$("$fastclock" run --help | grep -oE -- "^ *$o [a-z|]+" | awk '{ print $2 }' | tr '|' '\n' | sort -u)
    [ -n "$want" ] || { bad "run --help lists no values for $o"; continue; }
    same "run $o values" "$want" "$(complete_line fastclock run "$o" '')"
done

# After the wrapped command, its arguments are not fastclock's options.
got=$(complete_line fastclock run --mode tsc -- date --u)
case "$got" in *--mode*|*--unordered*) bad "after 'run ... -- date' it still offers run's options: $got" ;;
*) ok "after 'run ... -- date' run's options are no longer offered" ;; esac
exit $fail
