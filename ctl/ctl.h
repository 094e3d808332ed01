/*
 * rgpuctl's private header: what its commands share (ctl/common.c). Each command is a function
 * taking its own argv (argv[0] is the command's name) and returning the process's exit status.
 */
#ifndef CTL_H
#define CTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "rgpu/adminclient.h"

/*
 * Exit statuses (docs/operator-guide.md, "rgpuctl"). Never renumbered: scripts and cron jobs
 * test them.
 */
#define CTL_OK 0          /* done */
#define CTL_FAILED 1      /* the operation failed; the server said why; the job is as it was */
#define CTL_USAGE 2       /* a wrong command line */
#define CTL_UNREACHABLE 3 /* a server could not be reached, or did not prove the operator key */
#define CTL_NOTFOUND 4    /* no such job or checkpoint */
#define CTL_DAMAGED 5     /* a checkpoint is damaged (verify or restore said where) */
#define CTL_BUSY 6        /* another rgpuctl consolidate holds the lock */

#define CTL_MAX_SERVERS 256
/* consolidate's record of the servers it powered off (--state), and its lock (--lock) */
#define CTL_DEFAULT_STATE "/var/lib/rgpu/consolidate.json"
#define CTL_DEFAULT_LOCK "/run/lock/rgpu-consolidate.lock"

/* What the command line named: servers, output, and the commands' own options. */
struct ctl_opts {
	char *server[CTL_MAX_SERVERS]; /* admin addresses (--server, --cluster, $RGPU_ADMIN) */
	int nserver;
	int explicit_server;           /* --server given (not the cluster or the default) */
	int json;
	int progress;                  /* --progress: progress lines even without a terminal */
	const char *to;                /* --to SERVER */
	const char *client_address;    /* --client-address HOST:PORT */
	int cold;                      /* --cold */
	unsigned rounds;               /* --rounds N (0: the server's default) */
	/* consolidate: --dry-run, --power-off, --headroom PCT, --keep N, --lock FILE, --state FILE */
	int dry_run, power_off;
	double headroom;               /* a fraction (default 0.10) */
	unsigned keep;                 /* servers kept on at least (default 1) */
	unsigned settle_s;             /* --settle: wait for moved jobs' clients (default 30) */
	const char *lock_path, *state_path;
	/* the cluster file's settings (power-off = CMD, power-on = CMD), or NULL */
	char *power_off_cmd, *power_on_cmd;
	/* slurm: --gpus N, --mem SIZE (bytes), --write FILE, --reconfigure */
	unsigned gpus;
	uint64_t mem;
	const char *write_path;
	int reconfigure;
	char *args[8];                 /* positional arguments */
	int nargs;
};

/* The operator's key and TLS for every server asked (set by ctl_parse). */
extern struct rgpu_admin_peer ctl_peer;
/* rgpuctl --admin-key FILE COMMAND: given before the command (main) */
extern const char *ctl_admin_key_file;

/*
 * ctl_parse() - the command's options (common ones and those in `allowed`, a string of the
 * option letters: 't' --to, 'a' --client-address, 'c' --cold, 'r' --rounds), at most max_args positional
 * arguments. Returns 0, or an exit status (usage printed).
 */
int ctl_parse(int argc, char **argv, const char *cmd, const char *allowed, int max_args,
	      struct ctl_opts *o);
void ctl_opts_free(struct ctl_opts *o);

/* The exit status for an error from rgpu_admin_*: unreachable, or the operation failed. */
int ctl_status_of(int ret);

void ctl_fmt_bytes(uint64_t b, char *out, size_t len);
void ctl_fmt_age(uint64_t s, char *out, size_t len);
void ctl_hex(const ProtobufCBinaryData *b, char *out, size_t len);
const char *ctl_basename(const char *p);
void ctl_json_print(json_t *root);

/*
 * A progress bar on stderr for PROGRESS frames (rgpu_admin_progress_fn): phase, bytes, rate,
 * ETA; redrawn in place on a terminal, a line per phase and every 10% with --progress,
 * nothing otherwise. ctl_progress_end() ends its line.
 */
struct ctl_progress {
	int on, tty;
	char phase[32];
	uint64_t t0, last_draw;
	int last_pct;
};
void ctl_progress_init(struct ctl_progress *p, const struct ctl_opts *o);
void ctl_progress_cb(const struct Rgpu__Progress *pr, void *arg);
void ctl_progress_end(struct ctl_progress *p);

/* The commands (ctl/ckpt.c) */
int ctl_cmd_checkpoint(int argc, char **argv);
int ctl_cmd_checkpoints(int argc, char **argv);
int ctl_cmd_restore(int argc, char **argv);
int ctl_cmd_migrate(int argc, char **argv);
/* rgpuctl drain SERVER --to T[,T...] (drain set) / undrain SERVER (ctl/ckpt.c) */
int ctl_cmd_drain(int argc, char **argv, int drain);
int ctl_cmd_consolidate(int argc, char **argv);
int ctl_cmd_wake(int argc, char **argv);
/* rgpuctl slurm place|release|licenses (ctl/slurm.c) */
int ctl_cmd_slurm(int argc, char **argv);
/*
 * Powered-off servers (ctl/power.c). ctl_state_load(): the state file's servers, a JSON array
 * of admin addresses (empty if none); ctl_state_save(): written whole or not at all (0, -1);
 * ctl_state_has(): server's index + 1 in it, or 0. ctl_run_hook(): the cluster file's command
 * cmd for server with /bin/sh, RGPU_SERVER and RGPU_HOST set; its exit status or -1.
 * ctl_take_lock(): the lock file held, at once or waiting up to wait_s; its descriptor, or
 * -EBUSY, -errno.
 */
json_t *ctl_state_load(const char *path);
int ctl_state_save(const char *path, json_t *off);
int ctl_state_has(json_t *off, const char *server);
int ctl_run_hook(const char *cmd, const char *server);
int ctl_take_lock(const char *path, int wait_s);
/* One action of consolidate or wake: a JSON line (--json; j is taken) or the sentence. */
void ctl_action(const struct ctl_opts *o, json_t *j, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * ctl_follow_reservation() - after job (hex id) moved from one server to another: when its
 * label names a reservation on `from` that no other job there carries, the reservation moves
 * to `to` too (its first GPU). name receives the reservation moved ("" when none). Returns 0, or
 * an error said on stderr (the job has moved all the same).
 */
int ctl_follow_reservation(const char *from, const char *to, const char *job, char *name,
			   size_t len);
/* RESERVE name on GPU gpu of admin (release: end it there); the server's words in err */
int ctl_reserve(const char *admin, const char *name, unsigned gpu, uint64_t bytes, int release,
		char *err, size_t len);
/*
 * ctl_place() - rgpuctl run --cluster: the client address of the cluster's server with the most
 * free GPU memory (at least need bytes) that runs and is not drained; when none has room, the
 * first server consolidate powered off (state file) is powered on and waited for (120 s).
 * Returns CTL_OK with out filled, or an exit status (said on stderr).
 */
int ctl_place(const char *cluster, const char *state, uint64_t need, char *out, size_t len);
/*
 * ctl_wake_one() - the first server of the state file (consolidate's powered-off ones) whose
 * power-on command succeeds, taken out of the file and waited for (120 s) until it answers
 * undrained: its admin address in woke, {"listen": its client address} in *info (the caller
 * frees it). Says why on stderr as `who`. Returns CTL_OK, or CTL_UNREACHABLE.
 */
int ctl_wake_one(const struct ctl_opts *o, const char *state, const char *who, char *woke,
		 size_t len, json_t **info);
/*
 * ctl_pick_target() - where a job of `need` bytes of device memory can go: of the candidates,
 * reachable, not drained, the one with the most free memory on its first GPU that holds it,
 * and (client not NULL) where a client reaches its jobs. NULL if none; why then says what each
 * candidate lacked.
 */
const char *ctl_pick_target(char **cands, int n, uint64_t need, char *client, size_t clen,
			    char *why, size_t whylen);
/* ctl_reservation() - the reservation `name` in a server's status (on any GPU), or NULL */
struct Rgpu__StatusReply;
struct Rgpu__Reservation;
struct Rgpu__GpuInfo;
const struct Rgpu__Reservation *ctl_reservation(const struct Rgpu__StatusReply *st,
						const char *name);
/* ctl_gpu_free() - a GPU's memory free for a new job: total - used by jobs - reserved */
uint64_t ctl_gpu_free(const struct Rgpu__GpuInfo *g);
/* one live (o->cold: cold) migration of job on server to target, with a progress bar */
struct Rgpu__MigrateReply;
int ctl_migrate_call(const struct ctl_opts *o, const char *server, const char *job,
		     const char *target, struct Rgpu__MigrateReply **rep, char *err,
		     size_t errlen);

#endif
