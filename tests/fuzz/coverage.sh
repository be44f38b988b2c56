#!/bin/sh
# SPDX-License-Identifier: MIT
# coverage.sh TARGET CORPUS MIN: a short libFuzzer run of TARGET from a scratch copy of its seed
# corpus must cover more than MIN edges (libFuzzer's "cov:"). A target whose code under test was
# built without coverage instrumentation fuzzes blind: it stays at the few edges of its own harness.
set -eu
target=$1 corpus=$2 min=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$corpus"/. "$work"/
if ! out=$("$target" -seed=1 -runs=1000 -max_total_time=10 "$work" 2>&1); then
	printf '%s\n' "$out" | tail -30 >&2
	echo "$target failed" >&2
	exit 1
fi
cov=$(printf '%s\n' "$out" | sed -n 's/.* cov: \([0-9][0-9]*\) .*/\1/p' | sort -n | tail -1)
if [ -z "$cov" ]; then
	printf '%s\n' "$out" | tail -30 >&2
	echo "$target: no \"cov:\" in libFuzzer's output" >&2
	exit 1
fi
if [ "$cov" -le "$min" ]; then
	echo "$(basename "$target"): $cov coverage edges, want more than $min: is the code under test built with" \
		"-fsanitize=fuzzer-no-link (or compiled into the target)?" >&2
	exit 1
fi
echo "$(basename "$target"): $cov coverage edges (more than $min)"
