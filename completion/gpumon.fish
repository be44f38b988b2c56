# SPDX-License-Identifier: MIT
# gpumon.fish — fish completion for gpumon: commands, each command's options (read from its
# --help), query field names (from `gpumon query --help-query-gpu`), GPU ids (from `gpumon list`)
# and recording files. Installed to share/fish/vendor_completions.d.

function __gpumon_commands -a prog
    $prog --help 2>/dev/null | awk '/^Commands:/ {on=1; next} on && /^$/ {exit} on && $1 !~ /^\(/ {print $1}'
end

function __gpumon_options -a prog cmd
    $prog $cmd --help 2>/dev/null | awk '/^ +-/ {
        sub(/^ +/, ""); split($0, part, /  +/); n = split(part[1], w, /[ ,]+/)
        for (i = 1; i <= n; i++) if (w[i] ~ /^-/) { sub(/[=[].*/, "", w[i]); print w[i] } }'
end

# gpumon's own field list (aliases after "Also") or nvidia-smi's ("name" or "alias" lines)
function __gpumon_fields -a prog table
    set -l opt --help-query-gpu
    test "$table" = apps; and set opt --help-query-compute-apps
    $prog query $opt 2>/dev/null | awk -v want=$table '
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
end

function __gpumon_gpus -a prog
    $prog list 2>/dev/null | sed -n 's/^GPU \([0-9]*\):.*(UUID: \([^)]*\)).*/\1\n\2/p'
end

# Words for the current token: fish filters them by what is typed.
function __gpumon_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l prog $words[1]
    set -l cmds (__gpumon_commands $prog)
    set -l cmd
    set -l at 0
    for i in (seq 2 (count $words))
        if contains -- $words[$i] $cmds
            set cmd $words[$i]
            set at $i
            break
        end
    end
    if test "$cmd" = run; and contains -- -- $words[(math $at + 1)..-1]
        __fish_complete_path $cur
        return
    end
    set -l prev $words[-1]
    set -l pre ''
    if string match -qr -- '^--[^=]+=' $cur
        set prev (string replace -r -- '=.*' '' $cur)
        set pre "$prev="
        set cur (string replace -r -- '^[^=]*=' '' $cur)
    end
    # a list: what is before the last comma stays
    set -l head (string replace -r -- '[^,]*$' '' $cur)
    set -l values
    switch $prev
        case -i --id
            set values (__gpumon_gpus $prog)
        case --gpu
            set values auto (__gpumon_gpus $prog); set head ''
        case --query-gpu
            set values (__gpumon_fields $prog gpu)
        case --query-compute-apps
            set values (__gpumon_fields $prog apps)
        case --format
            set values csv noheader nounits json
        case --compat
            set values dcgm nvidia_smi
        case -s --sort
            set values memory pid user gpu; set head ''
        case --color --colour
            set values auto always never; set head ''
        case -u --user
            set values (__fish_complete_users | string replace -r '\t.*' ''); set head ''
        case -t --table
            set values device process framework events; set head ''
        case --processes
            set values all none; set head ''
        case --framework
            set values auto torch paddle jax tf all; set head ''
        case --paddle-strategy
            set values auto_growth naive_best_fit thread_local; set head ''
        case --on-exceed
            set values warn term kill; set head ''
        case --replay
            __fish_complete_suffix .gpumon
            return
        case -o --output --html -f --filename --tls-cert --tls-key --basic-auth-file
            __fish_complete_path $cur
            return
        case --interval --duration --speed -n -l --loop -lms --loop-ms --limit --initial --fraction \
            --max-split --gc-threshold --steps --listen --peak-window --max-connections --max-connections-per-ip \
            --timeout --keepalive
            return
    end
    if test (count $values) -gt 0
        for v in $values
            echo "$pre$head$v"
        end
        return
    end
    if string match -q -- '-*' $cur
        __gpumon_options $prog $cmd
        test -z "$cmd"; and __gpumon_options $prog show
        return
    end
    switch "$cmd"
        case ''
            printf '%s\n' $cmds
        case report
            __fish_complete_suffix .gpumon
            __fish_complete_suffix .csv
            __fish_complete_suffix .jsonl
        case export
            __fish_complete_suffix .gpumon
        case run
            __fish_complete_command
    end
end

complete -c gpumon -f -a '(__gpumon_complete)'
