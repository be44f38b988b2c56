# SPDX-License-Identifier: MIT
# deps.sh — sourced by the GPU scripts: where Debian's jansson, yajl, sqlite3, protobuf-c, ncurses,
# libevent and libssl-dev packages were unpacked under .deps/ (dpkg -x; for GPU machines without them), point
# CMake, the loader and PATH (protoc-c) there; and Debian's Python headers under .deps/python for
# the limited-API extension when the machine's Python has none (they build a module every
# CPython >= 3.9 loads: the limited API of 3.9). Then gpumon_build builds what a script needs.
prefix_args=()
prefix=
for d in jansson yajl sqlite protobuf-c ncurses libevent openssl; do
	if [ -d ".deps/$d/usr" ]; then
		prefix="${prefix:+$prefix;}$PWD/.deps/$d/usr"
		export LD_LIBRARY_PATH="$PWD/.deps/$d/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		[ -d ".deps/$d/usr/bin" ] && export PATH="$PWD/.deps/$d/usr/bin:$PATH"
	fi
done
[ -n "$prefix" ] && prefix_args=(-DCMAKE_PREFIX_PATH="$prefix")
for h in .deps/python/usr/include/python3.*; do
	[ -f "$h/Python.h" ] && prefix_args+=(-DGPUMON_PYTHON_INCLUDE_DIR="$PWD/$h")
done

# gpumon_build DIR TARGET...: a Release build without the tests in DIR, for the libraries above;
# prints the commands and their output (the caller sends them where it keeps its log). Status:
# non-zero when configuring or building failed or ran out of time (GPUMON_BUILD_TIMEOUT s each,
# default 150).
gpumon_build() {
	local dir=$1
	shift
	echo "\$ cmake -S . -B $dir -DCMAKE_BUILD_TYPE=Release -DGPUMON_TESTS=OFF ${prefix_args[*]}"
	timeout "${GPUMON_BUILD_TIMEOUT:-150}" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGPUMON_TESTS=OFF \
		"${prefix_args[@]}" &&
		timeout "${GPUMON_BUILD_TIMEOUT:-150}" cmake --build "$dir" -j "$(nproc)" --target "$@"
}

# gpumon_ready LOG TARGET...: sets BUILD to the build a script uses — GPUMON_PREBUILT when it names
# one (its libgpumon then first on the loader's path), else a Release build of TARGET... in
# $GPUMON_BUILD (default /tmp/gpumon-build), its output in LOG. Non-zero, with the log's last lines
# printed, when the build failed.
gpumon_ready() {
	local log=$1
	shift
	BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
	if [ -n "${GPUMON_PREBUILT:-}" ]; then
		BUILD=$(cd "$GPUMON_PREBUILT" && pwd)
		export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	elif ! gpumon_build "$BUILD" "$@" >"$log" 2>&1; then
		echo "FAIL build; last lines of $log:"
		tail -n 25 "$log"
		return 1
	fi
}

# gpu_out: the scripts' preamble — OUT made and absolute (default gpu-out), PY the Python to run.
gpu_out() {
	OUT=${OUT:-gpu-out}
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
	PY=${PYTHON:-python3}
}
