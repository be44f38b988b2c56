#!/bin/sh
# SPDX-License-Identifier: MIT
# stage.sh BUILD_DIR STAGING_DIR — installs a configured and built gpumon tree (cmake --install) into
# STAGING_DIR, as the image's build stage does (deploy/docker/Dockerfile): the runtime stage copies
# STAGING_DIR to its root. tests/deploy/test_image_tree.py runs it the same way.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: stage.sh BUILD_DIR STAGING_DIR" >&2
	exit 2
fi
DESTDIR="$2" cmake --install "$1" --strip >/dev/null
# what the image runs and needs, nothing else: the header and the bundled recording stay out
rm -rf "$2/usr/local/include" "$2/usr/local/share/gpumon"
test -x "$2/usr/local/bin/gpumon"
