#!/bin/sh
# Build the Debian packages rgpu-server, rgpu-client and rgpu-slurm (cmake/packaging.cmake):
# configure a build for /usr in $PKG_BUILD_DIR (default build-pkg) without the tests, build,
# run cpack, and print the path of each .deb, one a line, last.
# Needs dpkg-dev (dpkg-shlibdeps) and fakeroot besides the build's packages (install-deps.sh).
set -eu
cd "$(dirname "$0")/.."
dir=${PKG_BUILD_DIR:-build-pkg}
for tool in dpkg-shlibdeps dpkg-deb fakeroot; do
	command -v $tool >/dev/null || {
		echo "package.sh: $tool is missing (apt-get install dpkg-dev fakeroot)" >&2
		exit 1
	}
done
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DCMAKE_INSTALL_PREFIX=/usr \
	-DRGPU_BUILD_TESTS=OFF -DRGPU_BUILD_CUDA_TESTS=OFF -DRGPU_CUT_TESTS=OFF >/dev/null
cmake --build "$dir" -j"$(nproc)"
rm -f "$dir"/*.deb
# fakeroot: the files in the packages belong to root whoever builds them
(cd "$dir" && fakeroot cpack -G DEB >cpack.log 2>&1) || {
	cat "$dir/cpack.log" >&2
	echo "package.sh: cpack failed (log above: $dir/cpack.log)" >&2
	exit 1
}
ls "$(cd "$dir" && pwd)"/*.deb
