# bash completion for fastclock(1).  Installed as
# share/bash-completion/completions/fastclock; tests/cli/completion_test.sh
# checks that it offers exactly the commands and options the --help texts list.

_fastclock()
{
    local cur prev words cword
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    COMPREPLY=()

    if [ "$cword" -eq 1 ]; then
        COMPREPLY=($(compgen -W 'doctor bench run --help --version' -- "$cur"))
        return
    fi

    local cmd=${words[1]}
    case $cmd in
    doctor)
        COMPREPLY=($(compgen -W '--json --quick --help' -- "$cur"))
        ;;
    bench)
        case $prev in
        --svg) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
        --threads|--seconds) return ;;
        esac
        COMPREPLY=($(compgen -W '--json --csv --threads --seconds --svg --help' -- "$cur"))
        ;;
    run)
        # After the wrapped command's name, complete as for that command.
        local i
        for ((i = 2; i < cword; i++)); do
            case ${words[i]} in
            --) ;;
            --mode|--calibrator) ((i++)); continue ;;
            -*) continue ;;
            esac
            if [ "${words[i]}" = -- ] || [[ ${words[i]} != -* ]]; then
                local start=$i
                [ "${words[i]}" = -- ] && start=$((i + 1))
                if [ "$start" -ge "$cword" ]; then
                    COMPREPLY=($(compgen -c -- "$cur"))
                elif declare -F _command_offset >/dev/null; then
                    _command_offset "$start"
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return
            fi
        done
        case $prev in
        --mode) COMPREPLY=($(compgen -W 'auto tsc percpu system' -- "$cur")); return ;;
        --calibrator) COMPREPLY=($(compgen -W 'auto thread lazy' -- "$cur")); return ;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W '--mode --calibrator --unordered --help -h --' -- "$cur"))
        else
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        ;;
    esac
} &&
complete -F _fastclock fastclock
