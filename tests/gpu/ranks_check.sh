#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ranks_check.sh — a distributed job under `gpumon run` on a real GPU, from the repository root:
#   OUT=gpu-out bash tests/gpu/ranks_check.sh
# Builds gpumon (Release) unless GPUMON_PREBUILT=DIR names one. Then (tests/gpu/ranks_train.py,
# gloo, every rank on the one GPU):
#  1. torchrun with 4 workers, rank 2 keeping 16 MiB a step: the summary names rank 2 as the leak;
#  2. one job of two "nodes" (two torchrun agents, --nnodes 2, one c10d rendezvous on this machine),
#     each agent under its own `gpumon run` in a UTS namespace of its own (host names node-a and
#     node-b), rank 3 running out of memory after 12 s: `gpumon report node-a.gpumon node-b.gpumon`
#     reads them as one run, names both hosts and the four ranks, rank 3 as the one that ran out.
#     (On one machine both recordings list every worker on the one GPU, so each rank shows on both
#     "nodes'" GPUs: the checks count ranks, not rows.)
# Writes $OUT/ranks_check.txt and the recordings; exit 0 when every check held.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
. tests/gpu/deps.sh
gpumon_ready "$OUT/ranks_build.log" gpumon || exit 1
G=$BUILD/cli/gpumon
TR="$PY -m torch.distributed.run"
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
{
if [ "${RANKS_PART:-all}" != 2 ]; then
echo "== 1. torchrun, 4 workers on one GPU, rank 2 leaking"
rm -f "$OUT/ranks_leak.gpumon"
COLUMNS=200 $G run -o "$OUT/ranks_leak.gpumon" -- $TR --standalone --nproc-per-node 4 tests/gpu/ranks_train.py \
	--seconds 30 --leak-rank 2 >"$OUT/ranks_leak.out" 2>"$OUT/ranks_leak.err"
echo "exit $?"
sed -n '/gpumon run summary/,$p' "$OUT/ranks_leak.err"
check "a table of the 4 ranks" "grep -q 'ranks (torchrun job [^,]*, world size 4): 4 workers seen' '$OUT/ranks_leak.err'"
# the inside view reports each rank's allocator: the verdict is on rank 2's framework series
check "the leak named by rank 2" "grep -Eq \"leak: LEAK on .*rank 2\" '$OUT/ranks_leak.err'"
check "rank 2's row says LEAK" "grep -Eq '^ +2 +0 +[0-9]+ .* LEAK ' '$OUT/ranks_leak.err'"
fi

echo "== 2. one job, two nodes (two agents, one rendezvous), rank 3 running out of memory"
rm -f "$OUT/node-a.gpumon" "$OUT/node-b.gpumon"
for node in 0 1; do
	host=node-$([ $node = 0 ] && echo a || echo b)
	unshare --uts sh -c "hostname $host; COLUMNS=200 exec $G run -q -o '$OUT/$host.gpumon' -- $TR --nnodes 2 \
		--node-rank $node --nproc-per-node 2 --rdzv-backend static --master-addr 127.0.0.1 --master-port 29517 --rdzv-id job42 \
		tests/gpu/ranks_train.py --seconds 30 --oom-rank 3 --oom-after 12" >"$OUT/$host.out" 2>"$OUT/$host.err" &
done
wait
COLUMNS=200 $G report "$OUT/node-a.gpumon" "$OUT/node-b.gpumon" >"$OUT/ranks_merged.txt" 2>&1
echo "report exit $?"
cat "$OUT/ranks_merged.txt"
$G report --json "$OUT/node-a.gpumon" "$OUT/node-b.gpumon" >"$OUT/ranks_merged.json" 2>/dev/null
check "both hosts" "grep -q '^Hosts: *node-a' '$OUT/ranks_merged.txt' && grep -q 'node-b: GPU' '$OUT/ranks_merged.txt'"
check "four ranks in one table" "$PY -c \"import json,sys; d=json.load(open('$OUT/ranks_merged.json')); sys.exit(sorted({w['rank'] for w in d['ranks']}) != [0, 1, 2, 3])\""
check "rank 3 ran out" "grep -Eq 'Out of memory: +at .* \\(rank 3\\)' '$OUT/ranks_merged.txt'"
echo "checks failed: $fails"
} 2>&1 | tee "$OUT/ranks_check.txt"
grep -q "^checks failed: 0$" "$OUT/ranks_check.txt"
