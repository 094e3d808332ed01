#!/bin/sh
# package.clean_root: the Debian packages, installed in a clean Debian 12 root and used there
# the way an operator would.
#   clean_root.sh SOURCE_DIR BUILD_DIR VERSION
# 1. scripts/package.sh builds the three .debs in BUILD_DIR/tests/package/build-pkg;
# 2. a minimal bookworm root (debootstrap --variant=minbase, from the mirror the host's apt
#    uses; $RGPU_DEBIAN_MIRROR overrides) with apt's lists, kept as a tarball in
#    BUILD_DIR/tests/package (made once: a few minutes; later runs unpack it in seconds);
# 3. apt-get installs the .debs in it (their dependencies come from the mirror);
# 4. the files are where they belong (dpkg -L, exactly), the user rgpu exists, the binaries
#    have no run path and find every library, rgpud --version and rgpuctl --help run;
# 5. rgpud is started the way rgpud.service does (its ExecStart=, as User=, with UMask= and
#    the state and runtime folders made as systemd would), plus the build tree's simgpu as
#    the driver and free ports; the build tree's vecadd runs through the installed rgpuctl
#    (which finds the interposer by itself), as root over the unit's socket (shared memory)
#    and as nobody (TCP); rgpuctl status and jobs see a job holding 16 MiB;
# 6. apt-get remove keeps the user, the data and the conffile; purge removes them.
# Needs root and the Debian mirror; fails (never skips) without them. Prints each step's time.
set -eu
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
version=$3
work=$build/tests/package
root=$work/root
cache=$work/bookworm-minbase.tar
rgpud_pid=""
fail() {
	echo "clean_root: FAIL: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot, mounts): run the suite as root, as CI does"
for t in debootstrap chroot mount umount dpkg-deb fakeroot readelf python3; do
	command -v $t >/dev/null || fail "$t is missing (scripts/install-deps.sh installs debootstrap, dpkg-dev and fakeroot)"
done
for f in bin/rgpud tests/progs/vecadd tests/progs/hold tests/progs/kernels.fatbin lib/simgpu/libcuda.so.1; do
	[ -e "$build/$f" ] || fail "the build tree lacks $f (kernels.fatbin needs RGPU_BUILD_CUDA_TESTS=ON, the default)"
done

t0=$(date +%s.%N)
last=$t0
times=""
# step NAME: the time since the last step, kept for the summary
step() {
	now=$(date +%s.%N)
	d=$(echo "$now $last" | awk '{printf "%.1f", $1 - $2}')
	times="$times $1 ${d}s;"
	echo "clean_root: $1 took $d s"
	last=$now
}

# Everything mounted under the root, deepest first; the root is only deleted with none left.
unmount_root() {
	for m in $(awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
		umount "$m" || umount -l "$m" || true
	done
	! awk -v r="$root/" 'index($2, r) == 1 {found = 1} END {exit !found}' /proc/mounts
}
mount_root() {
	mount -t proc proc "$root/proc"
	mount -t sysfs -o ro sysfs "$root/sys"
	mount --bind /dev "$root/dev"
	# out of /dev's peer group (where / is shared, as under systemd), or what is mounted on
	# it below would appear on the host's /dev too
	mount --make-private "$root/dev"
	# a /dev/shm of its own, not the host's
	mount -t tmpfs -o mode=1777,size=256m shm "$root/dev/shm"
	# and ptys of its own (apt logs its scripts' output through one)
	mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
}
cleanup() {
	[ -n "$rgpud_pid" ] && kill "$rgpud_pid" 2>/dev/null && wait "$rgpud_pid" 2>/dev/null
	unmount_root || echo "clean_root: something under $root is still mounted: not removed" >&2
}
trap cleanup EXIT
trap 'exit 143' INT TERM
# in the root: a clean environment (nothing of ctest's, no RGPU_*), the usual PATH
in_root() {
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}

mkdir -p "$work"
unmount_root || fail "cannot unmount what a previous run left under $root"
rm -rf "$root"

# --- 1. the packages ------------------------------------------------------------------------
PKG_BUILD_DIR=$work/build-pkg "$src/scripts/package.sh" >"$work/package.log" 2>&1 ||
	{ tail -n 30 "$work/package.log"; fail "scripts/package.sh failed (log: $work/package.log)"; }
debs=""
for p in client server slurm; do
	deb=$work/build-pkg/rgpu-${p}_$version-1_amd64.deb
	grep -qx "$deb" "$work/package.log" || fail "package.sh did not make $deb: $(tail -n 5 "$work/package.log")"
	debs="$debs $(basename "$deb")"
done
made=$(cd "$work/build-pkg" && echo *.deb)
[ "$made" = "$(echo $debs)" ] || fail "package.sh made $made, want$debs"
step package

# --- 2. a clean Debian 12 root ----------------------------------------------------------------
# The host's mirror for bookworm: a one-line "deb URI bookworm ..." or a deb822 stanza
host_mirror() {
	python3 - <<'PY'
import glob, re
files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for f in files:
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for line in lines:
        t = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
        if len(t) >= 3 and t[0] == "deb" and t[2] == "bookworm":
            print(t[1]); raise SystemExit
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(f).read()):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if "deb" in fields.get("Types", "").split() and "bookworm" in fields.get("Suites", "").split():
            print(fields["URIs"].split()[0]); raise SystemExit
PY
}
if [ -f "$cache" ]; then
	mkdir "$root"
	tar -C "$root" -xf "$cache"
	step "root (from $(basename "$cache"))"
else
	mirror=${RGPU_DEBIAN_MIRROR:-$(host_mirror)}
	[ -n "$mirror" ] || fail "no bookworm entry in /etc/apt/sources.list(.d): set RGPU_DEBIAN_MIRROR"
	echo "clean_root: debootstrap --variant=minbase bookworm from $mirror (once; then $cache)"
	debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log"; fail "debootstrap failed (log: $work/debootstrap.log)"; }
	mount_root
	in_root apt-get update -qq >"$work/apt-update.log" 2>&1 ||
		{ cat "$work/apt-update.log"; fail "apt-get update in the new root failed"; }
	unmount_root || fail "cannot unmount $root"
	tar -C "$root" -cf "$cache.partial" . && mv "$cache.partial" "$cache"
	step "root (debootstrap, cached as $(basename "$cache"))"
fi
mount_root

# --- 3. install -------------------------------------------------------------------------------
mkdir -p "$root/tmp/debs"
for d in $debs; do cp "$work/build-pkg/$d" "$root/tmp/debs/"; done
install_debs() {
	# shellcheck disable=SC2046 # one argument per package file
	in_root DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		$(for d in $debs; do echo "/tmp/debs/$d"; done) >"$work/install.log" 2>&1
}
if ! install_debs; then
	# the cached lists may be older than the mirror (a point release): once more, up to date
	echo "clean_root: apt-get install failed; apt-get update and again"
	in_root apt-get update -qq >"$work/apt-update.log" 2>&1 || { cat "$work/apt-update.log"; fail "apt-get update failed"; }
	install_debs || { tail -n 30 "$work/install.log"; fail "apt-get install of$debs failed"; }
fi
step install

# --- 4. files, user, binaries -----------------------------------------------------------------
libdir=/usr/lib/x86_64-linux-gnu
expect_server=$(printf '%s\n' /etc/rgpu/rgpud.conf /lib/systemd/system/rgpud.service /usr/sbin/rgpud \
	/usr/share/bash-completion/completions/rgpud /usr/share/man/man5/rgpud.conf.5.gz \
	/usr/share/man/man8/rgpud.8.gz | sort)
expect_client=$(printf '%s\n' /usr/bin/rgpuctl $libdir/rgpu/libcuda.so.1 \
	/usr/share/bash-completion/completions/rgpuctl /usr/share/man/man1/rgpuctl.1.gz | sort)
expect_slurm=$(printf '%s\n' $libdir/slurm-wlm/spank_rgpu.so /usr/share/rgpu/slurm/job_submit.lua \
	/usr/share/rgpu/slurm/plugstack.conf.example | sort)
for p in server client slurm; do
	got=$(in_root dpkg -L rgpu-$p | while read -r f; do if [ -f "$root$f" ]; then echo "$f"; fi; done | sort)
	case $p in
	server) want=$expect_server ;;
	client) want=$expect_client ;;
	slurm) want=$expect_slurm ;;
	esac
	[ "$got" = "$want" ] || fail "rgpu-$p's files:
$got
want:
$want"
done
[ "$(in_root dpkg-query -W -f '${Conffiles}' rgpu-server | awk 'NF {print $1}')" = /etc/rgpu/rgpud.conf ] ||
	fail "rgpu-server's conffiles: $(in_root dpkg-query -W -f '${Conffiles}' rgpu-server)"
# the interposer is off the loader's path: nothing but rgpuctl run puts it in front
if in_root ldconfig -p | grep -q libcuda; then
	fail "the loader's cache knows a libcuda: $(in_root ldconfig -p | grep libcuda)"
fi
for f in /usr/sbin/rgpud /usr/bin/rgpuctl $libdir/rgpu/libcuda.so.1 $libdir/slurm-wlm/spank_rgpu.so; do
	if readelf -d "$root$f" | grep -E 'RPATH|RUNPATH'; then fail "$f has a run path"; fi
	if in_root ldd "$f" | grep 'not found'; then fail "$f lacks libraries in the root"; fi
done
# the Slurm plugin: Slurm's entry points, and the installed client's paths compiled in
plug=$root$libdir/slurm-wlm/spank_rgpu.so
for sym in plugin_name plugin_type slurm_spank_init slurm_spank_init_post_opt slurm_spank_task_init \
	slurm_spank_job_epilog; do
	readelf --dyn-syms -W "$plug" | awk '{print $8}' | grep -qx "$sym" || fail "spank_rgpu.so lacks $sym"
done
for p in /usr/bin/rgpuctl $libdir/rgpu; do
	grep -qaF "$p" "$plug" || fail "spank_rgpu.so does not name $p (the packages' paths)"
done
pw=$(in_root getent passwd rgpu) || fail "no user rgpu"
[ "$(echo "$pw" | cut -d: -f6,7)" = /var/lib/rgpu:/usr/sbin/nologin ] || fail "rgpu's passwd entry: $pw"
[ "$(in_root id -gn rgpu)" = rgpu ] || fail "rgpu's group: $(in_root id -gn rgpu)"
in_root id -Gn rgpu | tr ' ' '\n' | grep -qx video || fail "rgpu is not in video: $(in_root id -Gn rgpu)"
if in_root getent group render >/dev/null; then
	in_root id -Gn rgpu | tr ' ' '\n' | grep -qx render || fail "rgpu is not in render"
fi
[ "$(in_root stat -c '%U %G %a' /var/lib/rgpu)" = "rgpu rgpu 700" ] ||
	fail "/var/lib/rgpu: $(in_root stat -c '%U %G %a' /var/lib/rgpu)"
v=$(in_root rgpud --version) || fail "rgpud --version exited $?"
[ "$v" = "$("$build/bin/rgpud" --version)" ] && [ "${v#rgpud "$version" (protocol }" != "$v" ] ||
	fail "rgpud --version: '$v', want the build tree's '$("$build/bin/rgpud" --version)'"
h=$(in_root rgpuctl --help) || fail "rgpuctl --help exited $?"
[ "$(echo "$h" | head -n 1)" = "Usage: rgpuctl COMMAND [OPTIONS]" ] || fail "rgpuctl --help: $(echo "$h" | head -n 3)"
step checks

# --- 5. rgpud as the unit runs it ---------------------------------------------------------------
unit=$root/lib/systemd/system/rgpud.service
key() { # the value of the unit's KEY= (exactly one line)
	[ "$(grep -c "^$1=" "$unit")" -eq 1 ] || fail "rgpud.service has not one $1= line"
	sed -n "s/^$1=//p" "$unit"
}
exec_start=$(key ExecStart)
user=$(key User)
group=$(key Group)
umask_=$(key UMask)
# sh splits the line as systemd does only while it has no quotes, specifiers or variables
case $exec_start in *[\"\'%\$\\]*) fail "ExecStart= needs systemd's parsing: $exec_start" ;; esac
[ "$user" = rgpu ] && [ "$group" = rgpu ] || fail "rgpud.service runs as $user:$group"
state_dir=/var/lib/$(key StateDirectory)
state_mode=$(key StateDirectoryMode)
run_dir=/run/$(key RuntimeDirectory)
run_mode=$(key RuntimeDirectoryMode)
# StateDirectory= and RuntimeDirectory= as systemd makes them: owned by User=, in their Mode=
in_root install -d -o "$user" -g "$group" -m "$state_mode" "$state_dir"
in_root install -d -o "$user" -g "$group" -m "$run_mode" "$run_dir"
mkdir -p "$root/opt/simgpu" "$root/opt/rgpu-test"
cp "$build/lib/simgpu/libcuda.so.1" "$root/opt/simgpu/"
cp "$build/tests/progs/vecadd" "$build/tests/progs/hold" "$build/tests/progs/kernels.fatbin" \
	"$root/opt/rgpu-test/"
# the unit's command line, then the simulated driver and free ports (the later option wins)
# (chroot itself, not in_root: a function would run in a subshell, and $! would not be rgpud)
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/var/lib/rgpu \
	setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs \
	sh -c "umask $umask_; exec $exec_start --driver /opt/simgpu/libcuda.so.1 \
	--listen 127.0.0.1:0 --port-file /run/rgpu/port \
	--admin 127.0.0.1:0 --admin-port-file /run/rgpu/admin-port" >"$work/rgpud.log" 2>&1 &
rgpud_pid=$!
i=0
while { [ ! -s "$root/run/rgpu/port" ] || [ ! -s "$root/run/rgpu/admin-port" ]; } && [ $i -lt 200 ]; do
	kill -0 "$rgpud_pid" 2>/dev/null || { cat "$work/rgpud.log"; fail "rgpud did not start"; }
	sleep 0.05
	i=$((i + 1))
done
port=$(cat "$root/run/rgpu/port")
admin=127.0.0.1:$(cat "$root/run/rgpu/admin-port")
[ "$(in_root stat -c '%U %G %A' /run/rgpu/rgpud.sock)" = "rgpu rgpu srwxrwxr-x" ] ||
	fail "the socket: $(in_root stat -c '%U %G %A' /run/rgpu/rgpud.sock 2>&1)"

# vecadd through the installed client: root over the unit's socket (RGPU_TRANSPORT=shm fails
# the run if its link does not move there), nobody (no access to the socket) over TCP
want="vecadd: 1048576 elements OK"
out=$(in_root RGPU_TRANSPORT=shm rgpuctl run --server 127.0.0.1:"$port" -- /opt/rgpu-test/vecadd 2>"$work/vecadd.err") ||
	{ cat "$work/vecadd.err"; fail "vecadd as root exited $?"; }
[ "$out" = "$want" ] || fail "vecadd as root printed '$out' (stderr: $(cat "$work/vecadd.err"))"
out=$(in_root setpriv --reuid=nobody --regid=nogroup --clear-groups \
	rgpuctl run --log info --server 127.0.0.1:"$port" -- /opt/rgpu-test/vecadd 2>"$work/vecadd.err") ||
	{ cat "$work/vecadd.err"; fail "vecadd as nobody exited $?"; }
[ "$out" = "$want" ] || fail "vecadd as nobody printed '$out' (stderr: $(cat "$work/vecadd.err"))"
grep -q "stays on TCP: /run/rgpu/rgpud.sock cannot be reached" "$work/vecadd.err" ||
	fail "vecadd as nobody did not stay on TCP for want of the socket: $(cat "$work/vecadd.err")"
[ -d "$root/var/lib/rgpu/store" ] || fail "no store in /var/lib/rgpu: $(ls -la "$root/var/lib/rgpu")"

# status and jobs while a job holds 16 MiB
rm -f "$root/tmp/ready"
in_root rgpuctl run --server 127.0.0.1:"$port" -- /opt/rgpu-test/hold 16 /tmp/ready >"$work/hold.out" 2>&1 &
holder=$!
i=0
while [ ! -e "$root/tmp/ready" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
[ -e "$root/tmp/ready" ] || fail "hold never got ready: $(cat "$work/hold.out")"
sleep 0.7 # workers report every 0.5 s
in_root rgpuctl status --server "$admin" --json >"$work/status.json" || fail "rgpuctl status exited $?"
in_root rgpuctl jobs --server "$admin" --json >"$work/jobs.json" || fail "rgpuctl jobs exited $?"
python3 - "$work" "$admin" <<'PY' || fail "status and jobs: $(cat "$work/status.json" "$work/jobs.json")"
import json, sys
work, admin = sys.argv[1], sys.argv[2]
st = json.load(open(work + "/status.json"))["servers"]
jb = json.load(open(work + "/jobs.json"))
assert len(st) == 1 and st[0]["server"] == admin, st
assert st[0]["jobs"] == 1 and [g["name"] for g in st[0]["gpus"]] == ["rgpu simgpu"], st
assert jb["errors"] == [] and len(jb["jobs"]) == 1, jb
j = jb["jobs"][0]
assert j["program"] == "/opt/rgpu-test/hold" and j["state"] == "running", j
assert j["device_memory"] == 16 << 20, j
print("clean_root: status and jobs: 1 job, /opt/rgpu-test/hold, 16 MiB, on 'rgpu simgpu'")
PY
rm -f "$root/tmp/ready"
wait $holder || fail "hold exited $?: $(cat "$work/hold.out")"
[ "$(cat "$work/hold.out")" = "hold: 16 MiB held and verified" ] || fail "hold printed: $(cat "$work/hold.out")"

kill "$rgpud_pid"
rc=0
wait "$rgpud_pid" || rc=$?
rgpud_pid=""
[ $rc -eq 0 ] || { cat "$work/rgpud.log"; fail "rgpud exited $rc after SIGTERM, want 0"; }
grep -q "local clients on /run/rgpu/rgpud.sock" "$work/rgpud.log" ||
	{ cat "$work/rgpud.log"; fail "rgpud's log does not name the unit's socket"; }
step "rgpud and programs"

# --- 6. remove, purge ---------------------------------------------------------------------------
in_root DEBIAN_FRONTEND=noninteractive apt-get remove -y rgpu-server >"$work/remove.log" 2>&1 ||
	{ cat "$work/remove.log"; fail "apt-get remove rgpu-server failed"; }
[ ! -e "$root/usr/sbin/rgpud" ] || fail "rgpud is still there after remove"
in_root getent passwd rgpu >/dev/null || fail "remove took the user rgpu"
[ -d "$root/var/lib/rgpu/store" ] || fail "remove took /var/lib/rgpu/store"
[ -f "$root/etc/rgpu/rgpud.conf" ] || fail "remove took the conffile"
in_root DEBIAN_FRONTEND=noninteractive apt-get purge -y rgpu-server >"$work/purge.log" 2>&1 ||
	{ cat "$work/purge.log"; fail "apt-get purge rgpu-server failed"; }
! in_root getent passwd rgpu >/dev/null || fail "purge left the user rgpu"
! in_root getent group rgpu >/dev/null || fail "purge left the group rgpu"
[ ! -e "$root/var/lib/rgpu" ] && [ ! -e "$root/etc/rgpu" ] ||
	fail "purge left $(ls -d "$root/var/lib/rgpu" "$root/etc/rgpu" 2>/dev/null)"
step "remove and purge"

unmount_root || fail "cannot unmount $root"
rm -rf "$root"
trap - EXIT
total=$(echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}')
echo "clean_root: passed in $total s:$times"
