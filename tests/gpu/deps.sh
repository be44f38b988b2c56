# SPDX-License-Identifier: MIT
# deps.sh — sourced by the GPU scripts: where Debian's jansson and sqlite3 packages were unpacked
# under .deps/ (dpkg -x; for GPU machines without them), point CMake and the loader there.
prefix_args=()
prefix=
for d in jansson sqlite; do
	if [ -d ".deps/$d/usr" ]; then
		prefix="${prefix:+$prefix;}$PWD/.deps/$d/usr"
		export LD_LIBRARY_PATH="$PWD/.deps/$d/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	fi
done
[ -n "$prefix" ] && prefix_args=(-DCMAKE_PREFIX_PATH="$prefix")
