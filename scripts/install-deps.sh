#!/bin/sh
# Install what rgpu builds and tests with, from Debian's packages. The CUDA 13.0 toolkit is
# not in Debian: it must already be at $CUDA_HOME (default /usr/local/cuda), as on the build
# and CI machines.
set -eu
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PKGS="build-essential cmake pkg-config python3 procps
      libprotobuf-c-dev protobuf-c-compiler liblmdb-dev libzstd-dev libcmocka-dev
      nettle-dev zlib1g-dev libibverbs-dev libjansson-dev libssl-dev openssl libinih-dev
      libmicrohttpd-dev libxxhash-dev groff-base
      clang libclang-rt-14-dev llvm-14
      slurmctld slurmd slurm-client munge libslurm-dev
      dpkg-dev fakeroot debootstrap"
# groff-base: unit.man_pages renders docs/man with groff and fails on any warning
# clang, libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes; only recommended by
# clang, so named) and llvm-14 (llvm-symbolizer, for readable reports): the fuzz harnesses
# slurmctld, slurmd, slurm-client, munge: the Slurm tests' private one-node cluster
# (tests/slurm/cluster.sh: its own munge key and socket, its own ports; it needs none of the
# system services these packages bring, which on Debian do not start without
# /etc/slurm/slurm.conf, and a system munged on its default socket does not clash with it).
# job_submit/lua is in slurm-wlm-basic-plugins (with liblua5.1-0), a dependency of both
# daemons. libslurm-dev: spank.h, for SPANK plugins (issue 15; tests/slurm/demo_spank.c).
# dpkg-dev (dpkg-shlibdeps) and fakeroot: scripts/package.sh's Debian packages; debootstrap:
# the clean Debian root package.clean_root installs them in
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "install-deps: installing$missing"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
if [ ! -f "$CUDA_HOME/include/cuda.h" ] || [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
	echo "install-deps: the CUDA 13.0 toolkit is not at $CUDA_HOME (set CUDA_HOME)" >&2
	exit 1
fi
echo "install-deps: ready (CUDA toolkit at $CUDA_HOME)"
