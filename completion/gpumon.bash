# SPDX-License-Identifier: MIT
# gpumon.bash — bash completion for gpumon: commands, each command's options (read from its
# --help, so they never fall behind the program), query field names (from `gpumon query
# --help-query-gpu`), GPU ids (from `gpumon list`) and recording files.
# Installed to share/bash-completion/completions/gpumon; or: source completion/gpumon.bash

# The commands, from `gpumon --help` (the lines under "Commands:").
_gpumon_commands()
{
    "$1" --help 2>/dev/null | awk '/^Commands:/ {on=1; next} on && /^$/ {exit}
        on && $1 !~ /^\(/ {print $1}'
}

# The options of command $2 (none: the global ones), from the option column of its --help.
_gpumon_options()
{
    "$1" ${2:+"$2"} --help 2>/dev/null | awk '/^ +-/ {
        sub(/^ +/, ""); split($0, part, /  +/); n = split(part[1], w, /[ ,]+/)
        for (i = 1; i <= n; i++) if (w[i] ~ /^-/) { sub(/[=[].*/, "", w[i]); print w[i] } }'
}

# Query field names: TABLE is gpu or apps. Reads gpumon's own list (one field a line, aliases
# after "Also") or nvidia-smi's ("name" or "alias" lines).
_gpumon_fields()
{
    local opt=--help-query-gpu
    [ "$2" = apps ] && opt=--help-query-compute-apps
    "$1" query $opt 2>/dev/null | awk -v want="$2" '
        /^List of valid properties/ {smi = 1; next}
        smi && /^"/ {n = split($0, q, "\""); for (i = 2; i <= n; i += 2) print q[i]; next}
        smi {next}
        /^[A-Z].*fields.*:$/ {sec = /^GPU/ ? "gpu" : "apps"; next}
        /^$/ {sec = ""; next}
        sec == want && /^  [a-z]/ {
            print $1
            if (match($0, / Also .*$/)) {
                s = substr($0, RSTART + 6); sub(/\.$/, "", s); gsub(/,/, " ", s)
                n = split(s, a, " "); for (i = 1; i <= n; i++) print a[i]
            } }'
}

# GPU indexes and UUIDs, from `gpumon list` ("GPU 0: NAME (UUID: GPU-...)").
_gpumon_gpus()
{
    "$1" list 2>/dev/null | sed -n 's/^GPU \([0-9]*\):.*(UUID: \([^)]*\)).*/\1 \2/p' | tr ' ' '\n'
}

# Completes a comma-separated list: what is before the last comma stays, words follow it.
_gpumon_list()
{
    local cur=$1 prefix=
    shift
    [[ $cur == *,* ]] && prefix=${cur%,*},
    local IFS=$'\n'
    COMPREPLY=($(compgen -P "$prefix" -W "$*" -- "${cur##*,}"))
    [[ ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
}

# Files named *.EXT for EXT in $2 ("gpumon|csv"), and directories to go into.
_gpumon_files()
{
    local IFS=$'\n' reset
    reset=$(shopt -p extglob)
    shopt -s extglob # the @(...) pattern; bash-completion turns it on too
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -X "!*.@($2)" -- "$1") $(compgen -d -- "$1"))
    eval "$reset"
}

_gpumon()
{
    local prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=
    [[ $COMP_CWORD -gt 0 ]] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()
    # bash splits --opt=value at '=' (COMP_WORDBREAKS); put it back together
    if [[ $cur == = ]]; then cur=; elif [[ $prev == = ]]; then prev=${COMP_WORDS[COMP_CWORD - 2]}; fi
    if [[ $cur == --*=* ]]; then prev=${cur%%=*} cur=${cur#*=}; fi

    # the command: the first word that names one (not an option's value, as in `gpumon -i 0`)
    local cmd= i cmds=" $(_gpumon_commands "$prog" | tr '\n' ' ') "
    for ((i = 1; i < COMP_CWORD; i++)); do
        [[ $cmds == *" ${COMP_WORDS[i]} "* ]] && { cmd=${COMP_WORDS[i]}; break; }
    done
    # a word after `gpumon run [OPTIONS] --` or after its command is the job's: files
    if [[ $cmd == run ]]; then
        for ((i = i + 1; i < COMP_CWORD; i++)); do
            case ${COMP_WORDS[i]} in
            --) compopt -o default 2>/dev/null; return ;;
            esac
        done
    fi

    case $prev in
    -i|--id)
        _gpumon_list "$cur" $(_gpumon_gpus "$prog"); return ;;
    --gpu)
        COMPREPLY=($(compgen -W "auto $(_gpumon_gpus "$prog")" -- "$cur")); return ;;
    --query-gpu)
        _gpumon_list "$cur" $(_gpumon_fields "$prog" gpu); return ;;
    --query-compute-apps)
        _gpumon_list "$cur" $(_gpumon_fields "$prog" apps); return ;;
    --format)
        _gpumon_list "$cur" csv noheader nounits json; return ;;
    -s|--sort)
        [[ $cmd == show || -z $cmd ]] && { COMPREPLY=($(compgen -W "memory pid user gpu" -- "$cur")); return; } ;;
    --color|--colour)
        COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
    -u|--user)
        COMPREPLY=($(compgen -u -- "$cur")); return ;;
    --replay)
        _gpumon_files "$cur" gpumon; return ;;
    -t|--table)
        COMPREPLY=($(compgen -W "device process framework events" -- "$cur")); return ;;
    --compat)
        _gpumon_list "$cur" dcgm nvidia_smi; return ;;
    --processes)
        COMPREPLY=($(compgen -W "all none" -- "$cur")); return ;;
    --framework)
        COMPREPLY=($(compgen -W "auto torch paddle jax tf all" -- "$cur")); return ;;
    --paddle-strategy)
        COMPREPLY=($(compgen -W "auto_growth naive_best_fit thread_local" -- "$cur")); return ;;
    --on-exceed)
        COMPREPLY=($(compgen -W "warn term kill" -- "$cur")); return ;;
    -o|--output|--html|-f|--filename|--tls-cert|--tls-key|--basic-auth-file)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --interval|--duration|--speed|-n|-l|--loop|-lms|--loop-ms|--limit|--initial|--fraction|--max-split|\
    --gc-threshold|--steps|--listen|--peak-window|--max-connections|--max-connections-per-ip|--timeout|\
    --keepalive)
        return ;; # a number or an address: nothing to offer
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_gpumon_options "$prog" "$cmd")" -- "$cur"))
        [[ -z $cmd ]] && COMPREPLY+=($(compgen -W "$(_gpumon_options "$prog" show)" -- "$cur"))
        return
    fi
    case $cmd in
    '') COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
    report) _gpumon_files "$cur" "gpumon|csv|jsonl|log|txt" ;;
    export) _gpumon_files "$cur" gpumon ;;
    run) compopt -o default 2>/dev/null; COMPREPLY=($(compgen -c -- "$cur")) ;;
    esac
}
complete -F _gpumon gpumon
