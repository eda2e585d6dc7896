#!/bin/sh
# `fastclock run`: the preload reaches the command and its children, options
# become the environment, exit status and signals pass through, errors are
# clear and use the shell's codes (127 not found, 126 cannot execute) and
# 125 for run's own failures.
# usage: run_test.sh FASTCLOCK SHIM SHIM_CHECK SHIM_AGREE
set -u
fc=$1 shim=$2 check=$3 agree=$4
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# expect DESCRIPTION WANTED_STATUS STDERR_PATTERN -- COMMAND...
expect() {
    what=$1 want=$2 pattern=$3
    shift 4
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" != "$want" ]; then
        bad "$what: exit $got, want $want; stderr: $(cat "$tmp/err")"
    elif [ -n "$pattern" ] && ! grep -q -- "$pattern" "$tmp/err"; then
        bad "$what: stderr lacks '$pattern': $(cat "$tmp/err")"
    else
        ok "$what (exit $got)"
    fi
}

unchecked=""
unset LD_PRELOAD FASTCLOCK_MODE FASTCLOCK_CALIBRATOR FASTCLOCK_UNORDERED FASTCLOCK_PRELOAD

# The shim is loaded and interposes, in the command and in what it execs.
expect "the command runs under the shim" 0 "" -- "$fc" run -- "$check" interpose
expect "a child exec'd by the command, after cd, runs under the shim" 0 "" -- \
    "$fc" run -- sh -c "cd / && exec '$check' interpose"
expect "a grandchild started by a shell runs under the shim" 0 "" -- "$fc" run -- sh -c "'$check' exec"

# Options become the environment the shim reads.
out=$("$fc" run -- "$check" status)
case "$out" in *"calibrator=lazy unordered=0 forced=0"*) ok "defaults: $out" ;; *) bad "defaults: $out" ;; esac
out=$("$fc" run --mode system -- "$check" status)
case "$out" in *"mode=system"*"forced=1"*) ok "--mode system: $out" ;; *) bad "--mode system: $out" ;; esac
out=$("$fc" run --mode=tsc --calibrator=thread -- "$check" status)
case "$out" in *"calibrator=thread"*) ok "--mode=tsc --calibrator=thread: $out" ;; *) bad "--calibrator thread: $out" ;; esac
out=$("$fc" run --unordered -- "$check" status)
case "$out" in *"unordered=1"*) ok "--unordered: $out" ;; *) bad "--unordered: $out" ;; esac
out=$("$fc" run --mode auto -- sh -c 'echo "$FASTCLOCK_MODE"')
[ "$out" = auto ] && ok "--mode auto sets FASTCLOCK_MODE=auto" || bad "--mode auto: '$out'"

# LD_PRELOAD: appended to, never duplicated.
libm=$(ls /lib/x86_64-linux-gnu/libm.so.6 /lib64/libm.so.6 /usr/lib/libm.so.6 2>/dev/null | head -n 1)
out=$(LD_PRELOAD="$libm" "$fc" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$out" = "$libm:$shim" ] && ok "appends to an existing LD_PRELOAD: $out" || bad "LD_PRELOAD became '$out'"
out=$(LD_PRELOAD="$shim" "$fc" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$out" = "$shim" ] && ok "does not add the shim twice" || bad "LD_PRELOAD became '$out'"
out=$("$fc" run -- "$fc" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$out" = "$shim" ] && ok "nested runs keep one copy" || bad "nested: LD_PRELOAD became '$out'"

# Exit status and signals are the command's own.
out=$("$agree" status -- "$fc" run -- sh -c 'exit 7')
[ "$out" = "exited 7" ] && ok "exit status passes through ($out)" || bad "exit 7 came back as '$out'"
out=$("$agree" status -- "$fc" run -- sh -c 'kill -TERM $$')
[ "$out" = "signal 15" ] && ok "death by SIGTERM passes through ($out)" || bad "SIGTERM came back as '$out'"
out=$("$agree" status -- "$fc" run -- sh -c 'kill -SEGV $$')
[ "$out" = "signal 11" ] && ok "death by SIGSEGV passes through ($out)" || bad "SIGSEGV came back as '$out'"
out=$("$fc" run -- sh -c 'echo "$0 $1 $2"' zero "one two" three)
[ "$out" = "zero one two three" ] && ok "arguments pass through unchanged" || bad "arguments: '$out'"

# Errors, as a shell reports them.
expect "a missing command" 127 "no-such-command-x: command not found" -- "$fc" run -- no-such-command-x
expect "a missing path" 127 "No such file or directory" -- "$fc" run -- /nonexistent/prog
printf 'echo hi\n' >"$tmp/noexec"
expect "a file without execute permission" 126 "Permission denied" -- "$fc" run -- "$tmp/noexec"
expect "a directory" 126 "" -- "$fc" run -- "$tmp"
printf '#!/nonexistent/interpreter\n' >"$tmp/badinterp" && chmod +x "$tmp/badinterp"
expect "a script whose interpreter is missing" 126 "interpreter or loader was not found" -- "$fc" run -- "$tmp/badinterp"
expect "no command" 125 "no command given" -- "$fc" run
expect "no command after --" 125 "no command given" -- "$fc" run --mode tsc --
expect "an invalid --mode" 125 "--mode needs one of: auto tsc percpu tsc-percpu system (got 'fast')" -- "$fc" run --mode fast -- true
expect "--mode without a value" 125 "--mode needs one of" -- "$fc" run --mode
expect "an invalid --calibrator" 125 "--calibrator needs one of" -- "$fc" run --calibrator=x -- true
expect "an unknown option" 125 "unknown option '--frobnicate'" -- "$fc" run --frobnicate -- true
expect "--mode given twice" 125 "--mode is given twice" -- "$fc" run --mode tsc --mode system -- true
expect "--mode abbreviated, then given" 125 "--mode is given twice" -- "$fc" run --mod tsc --mode system -- true
expect "a value for --unordered" 125 "--unordered takes no value" -- "$fc" run --unordered=1 -- true
expect "a forgotten --mode value" 125 "--mode needs one of" -- "$fc" run --mode --unordered -- true
expect "an empty command" 125 "the command is an empty word" -- "$fc" run -- ""
expect "an inherited FASTCLOCK_MODE the library would ignore" 125 "FASTCLOCK_MODE=bogus in the environment" -- env FASTCLOCK_MODE=bogus "$fc" run -- true
expect "an inherited FASTCLOCK_CALIBRATOR the library would ignore" 125 "FASTCLOCK_CALIBRATOR=x in the environment" -- env FASTCLOCK_CALIBRATOR=x "$fc" run -- true
expect "an inherited FASTCLOCK_MODE as the library reads it (case, blanks)" 0 "" -- env "FASTCLOCK_MODE= TSC " "$fc" run -- true
expect "--mode over an inherited bad FASTCLOCK_MODE" 0 "" -- env FASTCLOCK_MODE=bogus "$fc" run --mode tsc -- true
expect "an inherited FASTCLOCK_UNORDERED the library would ignore" 125 "FASTCLOCK_UNORDERED=2 in the environment" -- env FASTCLOCK_UNORDERED=2 "$fc" run -- true
expect "an inherited FASTCLOCK_UNORDERED as the library reads it" 0 "" -- env "FASTCLOCK_UNORDERED= Yes " "$fc" run -- true
expect "--unordered over an inherited bad FASTCLOCK_UNORDERED" 0 "" -- env FASTCLOCK_UNORDERED=2 "$fc" run --unordered -- true
expect "--mode tsc-percpu (FASTCLOCK_MODE's own spelling)" 0 "" -- "$fc" run --mode tsc-percpu -- sh -c 'echo "$FASTCLOCK_MODE"'
grep -qx tsc-percpu "$tmp/out" && ok "--mode tsc-percpu reaches the command" || bad "--mode tsc-percpu: $(cat "$tmp/out")"
expect "--help" 0 "" -- "$fc" run --help
grep -q "usage: fastclock run" "$tmp/out" && ok "--help prints the usage on stdout" || bad "--help output: $(cat "$tmp/out")"

# Finding the shim.
cp "$shim" "$tmp/libfastclock-preload.so"
out=$(FASTCLOCK_PRELOAD="$tmp/libfastclock-preload.so" "$fc" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$out" = "$tmp/libfastclock-preload.so" ] && ok "FASTCLOCK_PRELOAD overrides the location" || bad "FASTCLOCK_PRELOAD: '$out'"
(cd "$tmp" && FASTCLOCK_PRELOAD=libfastclock-preload.so "$fc" run -- sh -c 'cd / && echo "$LD_PRELOAD"') >"$tmp/out"
[ "$(cat "$tmp/out")" = "$tmp/libfastclock-preload.so" ] && ok "a relative FASTCLOCK_PRELOAD is made absolute" ||
    bad "relative FASTCLOCK_PRELOAD: '$(cat "$tmp/out")'"
# Another copy of the shim in LD_PRELOAD would interpose before this one:
# it is replaced where it stood, and a copy after this one is dropped.
out=$(LD_PRELOAD="$tmp/libfastclock-preload.so:$libm" "$fc" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$tmp/err")
if [ "$out" = "$shim:$libm" ] && grep -q "another copy of the shim ($tmp/libfastclock-preload.so): replaced" "$tmp/err"; then
    ok "another copy of the shim is replaced where it stood: $out"
else
    bad "another copy: LD_PRELOAD became '$out'; stderr: $(cat "$tmp/err")"
fi
out=$(LD_PRELOAD="$libm $shim:$tmp/libfastclock-preload.so" "$fc" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$tmp/err")
if [ "$out" = "$libm:$shim" ] && grep -q "dropped" "$tmp/err"; then
    ok "a copy after this one is dropped: $out"
else
    bad "a later copy: LD_PRELOAD became '$out'; stderr: $(cat "$tmp/err")"
fi
ln -s "$shim" "$tmp/libfastclock-preload.so.0"
out=$(LD_PRELOAD="$tmp/libfastclock-preload.so.0" "$fc" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$tmp/err")
if [ "$out" = "$shim" ] && ! grep -q "another copy" "$tmp/err"; then
    ok "this shim by another name is this shim: $out"
else
    bad "a symlink to this shim: LD_PRELOAD became '$out'; stderr: $(cat "$tmp/err")"
fi
out=$(LD_PRELOAD="$tmp/libfastclock-preload.sox.so" "$fc" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
[ "$out" = "$tmp/libfastclock-preload.sox.so:$shim" ] && ok "a library whose name only starts like the shim's is kept" ||
    bad "libfastclock-preload.sox.so: LD_PRELOAD became '$out'"
expect "FASTCLOCK_PRELOAD pointing nowhere" 125 "FASTCLOCK_PRELOAD=/nonexistent/x.so: not a readable file" -- \
    env FASTCLOCK_PRELOAD=/nonexistent/x.so "$fc" run -- true
mkdir -p "$tmp/bin"
cp "$fc" "$tmp/bin/fastclock"
expect "a fastclock with no shim next to it" 125 "cannot find libfastclock-preload.so" -- "$tmp/bin/fastclock" run -- true
mkdir -p "$tmp/with space/bin" "$tmp/with space/lib"
cp "$fc" "$tmp/with space/bin/fastclock" && cp "$shim" "$tmp/with space/lib/"
expect "a shim path LD_PRELOAD cannot express" 125 "contains a space or a colon" -- "$tmp/with space/bin/fastclock" run -- true

# Programs the loader will not preload into: said, and still run.  On a
# nosuid mount (systemd mounts /tmp so) neither set-user-ID bits nor file
# capabilities take effect: then nothing is said.
truebin=$(ls /usr/bin/true /bin/true 2>/dev/null | head -n 1)
nosuid=0 mount_known=0
if opts=$(findmnt -no OPTIONS -T "$tmp" 2>/dev/null); then
    mount_known=1
    echo "$opts" | tr ',' '\n' | grep -qx nosuid && nosuid=1
fi
# expect_warning DESCRIPTION PATTERN -- COMMAND...: the warning, or none on a nosuid mount
expect_warning() {
    ew_what=$1 ew_pattern=$2
    shift 2
    if [ $nosuid = 1 ]; then
        expect "$ew_what (nosuid mount: no warning)" 0 "" "$@"
        [ -s "$tmp/err" ] && bad "$ew_what: warned on a nosuid mount: $(cat "$tmp/err")"
    else
        expect "$ew_what, with a warning" 0 "$ew_pattern" "$@"
    fi
}
if [ $mount_known = 0 ]; then
    echo "  (set-user-ID and file-capabilities warnings not checked: no findmnt to tell a nosuid mount)"
    unchecked="$unchecked; set-user-ID and file-capabilities warnings (no findmnt)"
elif [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    if cp "$truebin" "$tmp/suid-true" && chown nobody "$tmp/suid-true" && chmod 4755 "$tmp/suid-true"; then
        expect_warning "a set-user-ID program runs" "set-user/group-ID" -- "$fc" run -- "$tmp/suid-true"
        # No secure mode, so no warning: under no_new_privs (systemd's
        # NoNewPrivileges=) the bit gains nothing, and a script's is ignored.
        if command -v setpriv >/dev/null 2>&1; then
            expect "a set-user-ID program under no_new_privs runs, without a warning" 0 "" -- \
                setpriv --no-new-privs "$fc" run -- "$tmp/suid-true"
            [ -s "$tmp/err" ] && bad "warned under no_new_privs: $(cat "$tmp/err")"
        else
            unchecked="$unchecked; no_new_privs (no setpriv)"
        fi
        printf '#!/bin/sh\nexit 0\n' >"$tmp/suid-script" && chown nobody "$tmp/suid-script" && chmod 4755 "$tmp/suid-script"
        expect "a set-user-ID script runs, without a warning" 0 "" -- "$fc" run -- "$tmp/suid-script"
        [ -s "$tmp/err" ] && bad "warned for a set-user-ID script: $(cat "$tmp/err")"
    else
        unchecked="$unchecked; set-user-ID warning (could not make a set-user-ID copy of true)"
    fi
else
    echo "  (set-user-ID warning not checked: needs root and a 'nobody' user)"
    unchecked="$unchecked; set-user-ID warning (needs root and a 'nobody' user)"
fi
# File capabilities put an ordinary user's program in secure mode; root
# gains none, and its preload works.  'nobody' runs a copy of fastclock and
# the shim in $tmp: the build tree may be closed to it.
if [ $mount_known = 1 ] && [ "$(id -u)" = 0 ] && command -v setcap >/dev/null 2>&1 &&
    command -v setpriv >/dev/null 2>&1 && id nobody >/dev/null 2>&1 && cp "$truebin" "$tmp/cap-true" &&
    setcap cap_net_bind_service+ep "$tmp/cap-true" 2>/dev/null; then
    mkdir -p "$tmp/nb/bin" "$tmp/nb/lib" && cp "$fc" "$tmp/nb/bin/fastclock" && cp "$shim" "$tmp/nb/lib/" &&
        chmod -R a+rX "$tmp" && chmod 755 "$tmp"
    expect_warning "a program with file capabilities, run by an ordinary user" "file capabilities" -- \
        setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$tmp/nb/bin/fastclock" run -- "$tmp/cap-true"
    # Holding the capability already (ambient, as systemd's AmbientCapabilities=
    # gives it) changes nothing: a file with capabilities clears the ambient set.
    expect_warning "a program with file capabilities, run by an ordinary user who holds them" "file capabilities" -- \
        setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --inh-caps=+net_bind_service \
        --ambient-caps=+net_bind_service "$tmp/nb/bin/fastclock" run -- "$tmp/cap-true"
    expect "a program with file capabilities, run by root, gets no warning$([ $nosuid = 1 ] && echo ' (nosuid mount: would not anyway)')" \
        0 "" -- "$fc" run -- "$tmp/cap-true"
    [ -s "$tmp/err" ] && bad "root warned about file capabilities: $(cat "$tmp/err")"
else
    echo "  (file-capabilities warning not checked: needs findmnt, root, setcap, setpriv and a 'nobody' user)"
    unchecked="$unchecked; file-capabilities warning (needs findmnt, root, setcap, setpriv and a 'nobody' user)"
fi
# An execute-only set-user-ID program (mode 4711, root's): an ordinary user
# cannot read it to tell a program from a script, and a program it may be.
if [ $mount_known = 1 ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && id nobody >/dev/null 2>&1 &&
    cp "$truebin" "$tmp/xo-true" && chmod 4711 "$tmp/xo-true"; then
    mkdir -p "$tmp/nb/bin" "$tmp/nb/lib" && cp "$fc" "$tmp/nb/bin/fastclock" && cp "$shim" "$tmp/nb/lib/" &&
        chmod -R a+rX "$tmp/nb" && chmod 755 "$tmp"
    chmod 4711 "$tmp/xo-true"
    expect_warning "an execute-only set-user-ID program, run by an ordinary user" "set-user/group-ID" -- \
        setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$tmp/nb/bin/fastclock" run -- "$tmp/xo-true"
else
    echo "  (execute-only set-user-ID warning not checked: needs findmnt, root, setpriv and a 'nobody' user)"
    unchecked="$unchecked; execute-only set-user-ID warning (needs findmnt, root, setpriv and a 'nobody' user)"
fi
static=""
for f in /sbin/ldconfig /usr/sbin/ldconfig /bin/busybox; do
    if [ -x "$f" ] && ! readelf -lW "$f" 2>/dev/null | grep -q INTERP; then static=$f; break; fi
done
if [ -n "$static" ]; then
    expect "a statically linked program runs, with a warning" 0 "statically linked" -- "$fc" run -- "$static" --version
else
    echo "  (static-binary warning not checked: no statically linked program found)"
    unchecked="$unchecked; static-binary warning (no statically linked program found)"
fi
# A 32-bit program (here only its ELF header: the warning reads no more,
# and the exec that follows fails as it may): the loader cannot take the
# 64-bit shim into it.
printf '\177ELF\001\001\001\000\000\000\000\000\000\000\000\000\002\000\003\000' >"$tmp/elf32"
chmod +x "$tmp/elf32"
"$fc" run -- "$tmp/elf32" >/dev/null 2>"$tmp/err"
grep -q "elf32 is not a 64-bit .* program; the shim cannot be loaded into it" "$tmp/err" &&
    ok "a 32-bit program is warned about" || bad "a 32-bit program: stderr: $(cat "$tmp/err")"
expect "a dynamically linked program gets no warning" 0 "" -- "$fc" run -- true
[ -s "$tmp/err" ] && bad "unexpected stderr for 'true': $(cat "$tmp/err")"
# A check this machine cannot make is a skip, not a pass.
if [ $fail = 0 ] && [ -n "$unchecked" ]; then
    echo "SKIP: every other check passed; not checked here:${unchecked#;}"
    exit 77
fi
exit $fail
