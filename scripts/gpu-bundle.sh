#!/bin/sh
# Copy what tests/gpu/run.sh needs from the build into ./gpubundle (git-ignored), small enough
# to carry to the GPU host (the device tool's limit is 64 MiB).
set -eu
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
rm -rf gpubundle
mkdir -p gpubundle/bin gpubundle/lib gpubundle/tests/progs gpubundle/tests/e2e
cp -a "$B"/bin/rgpud "$B"/bin/rgpuctl "$B"/bin/procaddr_dump gpubundle/bin/
[ -x "$B"/bin/gpuhash_check ] && cp -a "$B"/bin/gpuhash_check gpubundle/bin/
# the checkpoint benchmark's references and the checkpoint tests' programs (issue 9), the
# loopback TCP ceiling (issue 14)
for t in store_bench d2h_bw peer_bw tcp_ceiling lanes_bench host_dma; do [ -x "$B/bin/$t" ] && cp -a "$B/bin/$t" gpubundle/bin/; done
[ -d "$B/tests/zdtm" ] && mkdir -p gpubundle/tests/zdtm &&
	find "$B/tests/zdtm" -maxdepth 1 -type f -name 'zdtm_*' -perm -u+x -exec cp -a {} gpubundle/tests/zdtm/ \;
cp -a "$B"/lib/*.so.* gpubundle/lib/
[ -d "$B"/lib/fallback ] && cp -a "$B"/lib/fallback gpubundle/lib/   # libssl, libcrypto (run.sh: if the host lacks them)
cp -a "$B"/lib/interposer gpubundle/lib/
[ -d "$B"/lib/darktrace ] && cp -a "$B"/lib/darktrace gpubundle/lib/
cp -a "$B"/tests/progs/* gpubundle/tests/progs/ 2>/dev/null || true
rm -rf gpubundle/tests/progs/CMakeFiles gpubundle/tests/progs/Makefile gpubundle/tests/progs/*.cmake
cp -a "$B"/tests/e2e/hostile "$B"/tests/e2e/cutproxy "$B"/tests/e2e/resume "$B"/tests/e2e/storepoke \
	gpubundle/tests/e2e/
cp -a "$B"/tests/procaddr_expected.txt "$B"/tests/procaddr_queries.txt gpubundle/tests/ 2>/dev/null || true
# the conformance programs (tests/conformance: build modes and the math libraries)
[ -d "$B/tests/conformance/bin" ] && mkdir -p gpubundle/tests/conformance &&
	cp -a "$B/tests/conformance/bin" gpubundle/tests/conformance/
[ -d "$B/tests/cuda" ] && mkdir -p gpubundle/tests/cuda && find "$B/tests/cuda" -maxdepth 1 -type f -perm -u+x -exec cp -a {} gpubundle/tests/cuda/ \;
# the native-only probe of stream capture (tests/gpu/capture_probe.cu)
[ -x "$B/tests/gpu/capture_probe" ] && mkdir -p gpubundle/tests/gpu && cp -a "$B/tests/gpu/capture_probe" gpubundle/tests/gpu/
# the test programs without their symbol tables (the fatbins stay): the bundle keeps under 64 MiB
find gpubundle/tests -type f -perm -u+x ! -name '*.sh' -exec strip --strip-unneeded {} + 2>/dev/null || true
# BEFORE=DIR: the build of the previous commit, so that run.sh benchmarks both from one run
if [ -n "${BEFORE:-}" ]; then
	mkdir -p gpubundle/before/bin gpubundle/before/lib
	cp -a "$BEFORE"/bin/rgpud gpubundle/before/bin/
	[ -x "$BEFORE"/bin/lanes_bench ] && cp -a "$BEFORE"/bin/lanes_bench gpubundle/before/bin/
	cp -a "$BEFORE"/lib/*.so.* gpubundle/before/lib/
	cp -a "$BEFORE"/lib/interposer gpubundle/before/lib/
fi
du -sh gpubundle
# the device tool carries at most 64 MiB with the working tree: carry the archive
# (gpubundle.tgz) and unpack it there: tar xzf gpubundle.tgz
tar czf gpubundle.tgz gpubundle && du -sh gpubundle.tgz
