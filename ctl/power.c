/*
 * Servers powered off and on (docs/operator-guide.md, "Consolidation and power-off"): the
 * state file of the servers consolidate powered off, its lock, the cluster file's power-off
 * and power-on commands, `rgpuctl wake`, and the wake of a powered-off server when a
 * placement (rgpuctl run --cluster, rgpuctl slurm place) finds no room elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "rgpu_admin_msgs.h"

/* The servers powered off by an earlier run (the state file), as a JSON array. */
json_t *ctl_state_load(const char *path)
{
	json_error_t e;
	json_t *root = json_load_file(path, 0, &e), *off;

	if (!root)
		return json_array();
	off = json_incref(json_object_get(root, "off"));
	json_decref(root);
	return json_is_array(off) ? off : (json_decref(off), json_array());
}

/* Written whole or not at all: a temporary file renamed over the old one. */
int ctl_state_save(const char *path, json_t *off)
{
	char tmp[4200];
	json_t *root = json_pack("{s:O}", "off", off);
	int ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ret = json_dump_file(root, tmp, JSON_INDENT(2)) || rename(tmp, path) ? -1 : 0;
	json_decref(root);
	return ret;
}

int ctl_state_has(json_t *off, const char *server)
{
	size_t i;
	json_t *v;

	json_array_foreach(off, i, v)
	{
		if (json_is_string(v) && !strcmp(json_string_value(v), server))
			return (int)i + 1;
	}
	return 0;
}

/*
 * Run the cluster file's command for server (power-off or power-on) with /bin/sh, RGPU_SERVER
 * (its admin address) and RGPU_HOST (its host) in the environment. Its exit status, or -1.
 */
int ctl_run_hook(const char *cmd, const char *server)
{
	char host[256];
	const char *colon = strrchr(server, ':');
	size_t hl = colon ? (size_t)(colon - server) : strlen(server);
	int st;
	pid_t pid;

	snprintf(host, sizeof(host), "%.*s", (int)hl, server);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		setenv("RGPU_SERVER", server, 1);
		setenv("RGPU_HOST", host, 1);
		dup2(STDERR_FILENO, STDOUT_FILENO); /* its words are not ours: stdout stays JSON */
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The lock file, held: at once, or waiting up to wait_s. Its descriptor, or -errno. */
int ctl_take_lock(const char *path, int wait_s)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	for (int i = 0;; i++) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return fd;
		if (errno != EWOULDBLOCK || i >= wait_s * 10) {
			int e = errno;
			close(fd);
			return e == EWOULDBLOCK ? -EBUSY : -e;
		}
		nanosleep(&(struct timespec){0, 100000000}, NULL);
	}
}

int ctl_cmd_wake(int argc, char **argv)
{
	struct ctl_opts o;
	json_t *off = NULL;
	const char *state, *server, *lock;
	int ret = ctl_parse(argc, argv, "wake", "LS", 1, &o), r, idx, lockfd = -1;

	if (ret || o.nargs != 1) {
		fprintf(stderr, "usage: rgpuctl wake SERVER [--cluster FILE] [--lock FILE] "
				"[--state FILE] [--json]\n");
		ctl_opts_free(&o);
		return ret < 0 ? CTL_OK : CTL_USAGE;
	}
	server = o.args[0];
	state = o.state_path ? o.state_path : CTL_DEFAULT_STATE;
	lock = o.lock_path ? o.lock_path : CTL_DEFAULT_LOCK;
	if (!o.power_on_cmd) {
		fprintf(stderr, "rgpuctl wake: the cluster file has no 'power-on = CMD' line\n");
		ret = CTL_USAGE;
		goto out;
	}
	/* the state file is consolidate's too: a run in progress finishes first */
	lockfd = ctl_take_lock(lock, 120);
	if (lockfd < 0) {
		fprintf(stderr, "rgpuctl wake: %s %s\n",
			lockfd == -EBUSY ? "a consolidate run held the lock for 2 minutes:"
					 : "cannot take the lock",
			lock);
		ret = lockfd == -EBUSY ? CTL_BUSY : CTL_FAILED;
		goto out;
	}
	off = ctl_state_load(state);
	r = ctl_run_hook(o.power_on_cmd, server);
	if (r) {
		ctl_action(&o,
		       json_pack("{s:s,s:s,s:i,s:s}", "action", "power-on", "server", server, "result",
				 r, "error", "the power-on command failed"),
		       "%s: the power-on command failed (exit %d)", server, r);
		ret = CTL_FAILED;
		goto out;
	}
	if ((idx = ctl_state_has(off, server))) {
		json_array_remove(off, (size_t)idx - 1);
		if (ctl_state_save(state, off)) {
			fprintf(stderr, "rgpuctl wake: cannot write %s: %s\n", state, strerror(errno));
			ret = CTL_FAILED;
			goto out;
		}
	}
	ctl_action(&o, json_pack("{s:s,s:s,s:i}", "action", "power-on", "server", server, "result", 0),
	       "%s powered on; consolidate plans onto it again", server);
out:
	json_decref(off);
	if (lockfd >= 0)
		close(lockfd);
	ctl_opts_free(&o);
	return ret;
}

int ctl_wake_one(const struct ctl_opts *o, const char *state, const char *who, char *woke,
		 size_t len, json_t **info)
{
	json_t *off = ctl_state_load(state);
	int ret = CTL_UNREACHABLE;

	*info = NULL;
	for (size_t k = 0; ret && k < json_array_size(off); k++) {
		const char *s = json_string_value(json_array_get(off, k));
		int lockfd;
		if (!s)
			continue;
		if (!o->power_on_cmd) {
			fprintf(stderr, "%s: no server has room and the cluster file has no "
					"'power-on = CMD' to wake %s\n",
				who, s);
			break;
		}
		fprintf(stderr, "%s: no server has room; waking %s\n", who, s);
		if (ctl_run_hook(o->power_on_cmd, s)) {
			fprintf(stderr, "%s: the power-on command for %s failed\n", who, s);
			continue;
		}
		/* consolidate's state file, under its lock: the server is on again */
		lockfd = ctl_take_lock(o->lock_path ? o->lock_path : CTL_DEFAULT_LOCK, 120);
		json_t *now = ctl_state_load(state);
		int idx = ctl_state_has(now, s);
		if (idx) {
			json_array_remove(now, (size_t)idx - 1);
			ctl_state_save(state, now);
		}
		json_decref(now);
		if (lockfd >= 0)
			close(lockfd);
		for (int t = 0; t < 1200 && ret; t++) {
			Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
			Rgpu__StatusReply *st = NULL;
			char err[400];
			if (!rgpu_admin_once(&ctl_peer, s, RGPU_ADMIN_MSG_STATUS, &req.base,
					     &rgpu__status_reply__descriptor, (ProtobufCMessage **)&st,
					     NULL, NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err)) &&
			    !st->drained) {
				snprintf(woke, len, "%s", s);
				*info = json_pack("{s:s}", "listen", st->listen);
				ret = CTL_OK;
			} else {
				nanosleep(&(struct timespec){0, 100000000}, NULL);
			}
			if (st)
				rgpu__status_reply__free_unpacked(st, NULL);
		}
		if (ret)
			fprintf(stderr, "%s: %s did not answer within 120 s of its power-on\n", who, s);
	}
	json_decref(off);
	return ret;
}

