# SPDX-License-Identifier: MIT
# deps.sh — sourced by the GPU scripts: where Debian's jansson, sqlite3 and protobuf-c packages
# were unpacked under .deps/ (dpkg -x; for GPU machines without them), point CMake, the loader and
# PATH (protoc-c) there; and Debian's Python headers under .deps/python for the limited-API
# extension when the machine's Python has none (they build a module every CPython >= 3.11 loads).
prefix_args=()
prefix=
for d in jansson sqlite protobuf-c ncurses microhttpd; do
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
