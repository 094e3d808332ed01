/*
 * rgpud's private header: the supervisor, the per-session worker and its parts.
 *
 * A worker owns one client session: a reader thread that takes frames off the connection, an
 * executor thread (the worker's main thread) that runs them in order against the driver, and
 * driver callback threads that push data and host-function triggers back to the client.
 */
#ifndef SRV_H
#define SRV_H

#include <pthread.h>
#include <search.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cuda.h>
#include <protobuf-c/protobuf-c.h>

#include "driver.h"
#include "rgpu/frame.h"
#include "rgpu/record.h"
#include "rgpu/statetrack.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "rgpu_msgs.h"

/*
 * A tenant's limits (rgpud.conf's [defaults] and [tenant NAME] sections; config.c, quota.c).
 * Counts and bytes are SRV_UNLIMITED for no limit; `set` says which fields the file gave, so
 * a [tenant NAME] section overrides only what it names of [defaults].
 */
#define SRV_UNLIMITED UINT64_MAX
struct srv_limits {
	uint64_t memory;        /* device memory of all its sessions together, bytes */
	uint64_t sessions;      /* its sessions at once */
	uint64_t queued;        /* a session's --max-queued; 0: the server's */
	uint64_t module_cache;  /* image bytes of the module cache it may own */
	int idle_timeout_s;     /* a session's --idle-timeout; -1: the server's; 0: never */
	unsigned set;           /* SRV_LIM_* bits: fields the configuration gave */
};
#define SRV_LIM_MEMORY 1u
#define SRV_LIM_SESSIONS 2u
#define SRV_LIM_QUEUED 4u
#define SRV_LIM_MODULE_CACHE 8u
#define SRV_LIM_IDLE 16u

/* [tenant NAME]: one tenant's limits */
struct srv_tenant_limits {
	char name[65];          /* RGPU_TENANT_MAX */
	struct srv_limits lim;
};

struct srv_config {
	const char *listen;     /* "HOST:PORT" */
	const char *socket;     /* --socket: the Unix-domain socket of local clients (shared
				 * memory); NULL: STATE_DIR/rgpud-PORT.sock, "none": no socket */
	const char *driver;     /* path of libcuda.so.1 to load; NULL = the system's */
	const char *state_dir;  /* rgpud --data (or --state-dir): the module cache in modules/,
				 * the checkpoint store in checkpoints/ */
	const char *peer_tls_ca; /* --peer-tls-ca: the CA other servers' certificates chain to (a
				  * migration's target); NULL: the system's */
	int barrier_timeout_s;  /* how long a checkpoint waits for the executor's barrier */
	uint64_t module_cache_bytes; /* bound of the module cache; 0: no cache */
	uint64_t window_base;
	uint64_t window_size;
	int staging_buffers;    /* pinned chunks per worker */
	const char *port_file;  /* write the bound port here (tests listen on port 0) */
	const char *admin;      /* "HOST:PORT" of the admin protocol; NULL: none */
	const char *admin_port_file;
	const char *metrics;    /* "HOST:PORT" of GET /metrics (Prometheus); NULL: off */
	const char *metrics_port_file;
	int resume_grace_s;     /* how long a job outlives a broken link */
	int hello_timeout_s;    /* a connection's MSG_HELLO must be whole this long after accept */
	int frame_timeout_s;    /* every later frame, this long after its first byte */
	uint64_t max_queued;    /* frame bytes a worker's reader queues before it stops reading */
	int max_sessions;       /* jobs served at once; a new one beyond is refused (0: no limit) */
	int idle_timeout_s;     /* a job without a frame or work this long ends (0: never) */
	const char *keys_dir;   /* tenant keys, DIR/TENANT.key (auth.c); NULL: no authentication */
	int insecure;           /* --insecure: listen beyond loopback without --keys */
	const struct rgpu_key *admin_key; /* --admin-key: the operator's key; NULL: none */
	const char *tls_cert;   /* --tls-cert, --tls-key: PEM files */
	const char *tls_key;
	struct rgpu_tls *tls;   /* TLS on both ports (made from them); NULL: plaintext */
	struct srv_limits tenant_defaults;       /* [defaults] of the config file */
	const struct srv_tenant_limits *tenants; /* its [tenant NAME] sections */
	size_t ntenants;
};

#define SRV_MODULE_CACHE_BYTES (1ull << 30)   /* --module-cache-bytes by default */
#define SRV_MODULE_CACHE_MAX (1ull << 40)     /* and at most */
#define SRV_CONFIG_FILE "/etc/rgpu/rgpud.conf" /* rgpud --config by default, when it exists */

/* ---- the configuration file (config.c) --------------------------------------------------- */
struct option;
/* What a configuration file says (srv_conf_load). */
struct srv_conf {
	char **argv;            /* [server] as rgpud's long options, "--NAME=VALUE" or "--NAME" */
	char **where;           /* for each, "FILE:LINE" */
	int argc;
	struct srv_limits defaults;        /* [defaults] */
	struct srv_tenant_limits *tenants; /* [tenant NAME] sections */
	size_t ntenants;
};
/*
 * srv_conf_load() - read the configuration file at path. [server] keys must be names of opts
 * (rgpud's long options, not config, replay, help or version); an option without an argument
 * takes true or false. Limits are checked here, [server] values by the caller's parser.
 * @err, @errlen: on failure, "PATH:LINE: what is wrong" (or "PATH: why it cannot be read").
 * Returns 0, RGPU_ENOTFOUND (no such file), RGPU_ESYS (unreadable) or RGPU_EINVAL (the first
 * error; nothing is kept). srv_conf_free() frees what it filled.
 */
int srv_conf_load(const char *path, const struct option *opts, struct srv_conf *out, char *err,
		  size_t errlen);
void srv_conf_free(struct srv_conf *c);
/* srv_limits_init() - no limit set: unlimited, the server's --max-queued and --idle-timeout */
void srv_limits_init(struct srv_limits *l);
/*
 * srv_limits_for() - tenant's limits ("" without keys): its [tenant NAME] over [defaults] over
 * no limit; queued and idle_timeout_s resolved to the server's when neither section set them.
 */
void srv_limits_for(const struct srv_config *cfg, const char *tenant, struct srv_limits *out);

/* ---- per-tenant accounting across the workers (quota.c) ---------------------------------- */
#define SRV_ACCT_TENANTS 4096  /* distinct tenants a server counts from its start */
#define SRV_ACCT_SLOTS 4096    /* sessions at once counted when --max-sessions is 0 */
/*
 * srv_acct_create() - the supervisor, before it forks: map the shared table, nslots sessions.
 * Returns 0, RGPU_ENOMEM or RGPU_ESYS (logged). srv_acct_destroy() unmaps it.
 */
int srv_acct_create(int nslots);
void srv_acct_destroy(void);
/* srv_acct_slot_take() - the supervisor: a free slot for a new worker, or -1 (all taken) */
int srv_acct_slot_take(void);
/*
 * srv_acct_slot_release() - the supervisor, when it reaps the slot's worker: whatever the
 * worker held (device bytes, its session) is given back, however the worker ended.
 */
void srv_acct_slot_release(int slot);
/* srv_acct_become() - in the new worker: its slot (-1: none) */
void srv_acct_become(int slot);
/*
 * srv_acct_join() - the worker, once its tenant is known: its slot names tenant, and counts as
 * one of its sessions unless it already has max_sessions (SRV_UNLIMITED: no limit). *sessions:
 * the tenant's sessions, this one included when it joined. Returns 0, RGPU_EBUSY (over
 * max_sessions) or RGPU_ENOSPC (no slot, or SRV_ACCT_TENANTS tenants already).
 */
int srv_acct_join(const char *tenant, uint64_t max_sessions, unsigned *sessions);
/* srv_acct_leave() - the worker's job ends: its bytes and session are given back now */
void srv_acct_leave(void);
/*
 * srv_acct_charge() - count bytes more of device memory for this worker's tenant, unless its
 * sessions would then hold more than limit (SRV_UNLIMITED: no limit). *used: what they held.
 * Returns 0 (also in a process with no slot: nothing is counted) or RGPU_ENOSPC.
 * srv_acct_uncharge() gives bytes back.
 */
int srv_acct_charge(uint64_t bytes, uint64_t limit, uint64_t *used);
void srv_acct_uncharge(uint64_t bytes);
/* srv_acct_usage() - what tenant's sessions hold now; RGPU_ENOTFOUND for a tenant never seen */
int srv_acct_usage(const char *tenant, uint64_t *bytes, unsigned *sessions);
/*
 * srv_mem_charge() - device memory of bytes on w->dev[device] is about to be made for w's job:
 * count it (w->dev_bytes, w->dev_bytes_by[device], its tenant's use). CUDA_ERROR_OUT_OF_MEMORY,
 * said once at warn, when that would take the tenant over its memory quota; what the driver
 * answers when the GPU is full.
 * srv_mem_uncharge() - the memory is released (or was never made).
 */
struct srv_worker;
CUresult srv_mem_charge(struct srv_worker *w, int device, uint64_t bytes);
void srv_mem_uncharge(struct srv_worker *w, int device, uint64_t bytes);
/* srv_tenant_label() - "tenant 'NAME'", or "the anonymous tenant" for "" (one static buffer) */
const char *srv_tenant_label(const char *tenant);

/* ---- authentication (auth.c) ------------------------------------------------------------- */
struct srv_worker;
struct Rgpu__Hello;
struct rgpu_key;
/*
 * srv_keys_check() - at start-up: the key directory exists and every key file in it is a
 * usable key of a valid tenant name. Returns the number of keys, or -1 (logged).
 */
int srv_keys_check(const char *dir);
/*
 * srv_auth() - authenticate the client of a new connection, before anything else happens: the
 * challenge (MSG_AUTH_CHALLENGE), the client's answer (MSG_AUTH), the check. On success the
 * tenant is in w->tenant and the server's proof in proof (RGPU_AUTH_MAC_LEN bytes; *has_proof
 * set) when the server has keys. Returns 0, or RGPU_EAUTH with why filled (for the client, the
 * reason the server logs being fuller), or a transport error (the client left).
 */
int srv_auth(struct srv_worker *w, const struct Rgpu__Hello *hello, uint8_t *proof,
	     int *has_proof, char *why, size_t whylen);

/* ---- TLS (tls.c) ------------------------------------------------------------------------ */
/*
 * srv_tls_start() - at a new connection, by its deadline: with cfg->tls, the TLS handshake (a
 * peer that starts plaintext gets an error frame of error_type saying TLS is required); without
 * it, a peer that starts TLS is refused. Logs once at warn why a peer is refused. Returns 0 (go
 * on with the first frame), RGPU_ETLS, or the transport's error. who names the peer in logs.
 */
int srv_tls_start(const struct srv_config *cfg, struct rgpu_conn *c, const char *who,
		  uint16_t error_type);

/* ---- supervisor ------------------------------------------------------------------------ */
int srv_supervise(const struct srv_config *cfg);
/* layout.c: rgpud's mappings clear of its clients' (the drivers' __managed__ addresses) */
void srv_layout_reexec(char **argv);
void srv_layout_say(uint64_t window_base, uint64_t window_size);
/* srv_probe_run() - report the server's GPUs on fd (CTL_GPUS) and exit (probe.c) */
void srv_probe_run(const struct srv_config *cfg, int fd) __attribute__((noreturn));

/* ---- worker ---------------------------------------------------------------------------- */

/*
 * A client id mapped to the real driver handle behind it. `kind` is the state log's (enum
 * st_kind): a CUmodule and a CUlibrary are both ST_KIND_MODULE, told apart by `library`. What
 * recreates the object (creation parameters, parent, image hash, name, flags, attributes set)
 * is its record in the worker's state log, under the same id (statelog.c).
 */
struct srv_obj {
	uint64_t id;
	int kind;           /* enum st_kind */
	void *h;            /* CUcontext, CUstream, CUevent, CUmodule, CUlibrary, CUfunction... */
	uint64_t ctx;       /* owning client context id (0 for contexts) */
	uint64_t parent;    /* module/library of a function or kernel */
	int device;         /* contexts, physical memory: its index in w->dev (srv_dev_local) */
	int primary;        /* contexts: a retained primary context */
	int library;        /* modules: a CUlibrary */
	uint64_t size;      /* physical memory (ST_KIND_PHYSMEM, h its handle): bytes; functions
			     * and kernels: the bytes their parameters span (a launch's least) */
	uint64_t recorded;  /* events: the seq of the frame that last recorded it (0: none did) */
	uint64_t extent[3]; /* arrays, mipmapped arrays (level 0): width in bytes, height and
			     * depth or layers, each at least 1; h the CUarray or
			     * CUmipmappedArray (an array with a parent is a level: not destroyed
			     * on its own) */
	uint32_t elem;      /* arrays: bytes per element; texture objects: 1 for a surface
			     * object (h is then the CUtexObject or CUsurfObject value) */
	uint32_t aflags;    /* arrays, mipmapped arrays: their CUDA_ARRAY3D_* flags */
};

/*
 * A range of the window backed by device memory: one the window allocator asked for, which owns
 * its physical memory h, or one the application mapped (cuMemMap), which maps physical memory
 * that is an object of its own (owner: its client id).
 */
struct srv_map {
	uint64_t addr;
	uint64_t size;
	CUmemGenericAllocationHandle h;
	int device;      /* its index in w->dev (srv_dev_local), not the client's number */
	uint64_t owner;  /* the application's mapping: the physical memory's id; 0: owns h;
			  * a module global (w->globals): its module's id */
	uint64_t offset; /* the application's mapping: where in that memory it starts */
};

/* A frame taken off the connection, waiting for the executor. */
struct srv_frame {
	struct rgpu_frame_hdr hdr;
	uint8_t *body;
	void *payload;
	int payload_staged;   /* payload is a staging buffer (return it to the pool) */
	struct rgpu_payload pref; /* payload is where the client put it (shared memory): release */
	ProtobufCMessage *decoded; /* the body, decoded ahead by the reader (MSG_LAUNCH), or NULL */
	struct srv_frame *next;
};

struct srv_staging;
struct srv_gnodes;
struct srv_gexec;
struct srv_nstream;
struct Rgpu__GraphAt;

/*
 * The default of rgpud --max-queued: frame bytes (header, body and payload) the reader may queue
 * ahead of the executor. Past it the reader stops reading until the executor catches up, and
 * the client's sends wait in TCP. The reader never waits for a staging buffer (a host function
 * may be holding the stream that frees them while its acknowledgement sits behind this very
 * data); it falls back to plain memory up to this bound. The client is told the bound in the
 * handshake and keeps no more unexecuted frames than that, so its callback acknowledgements
 * never wait behind a stopped reader.
 */
#define SRV_MAX_QUEUED_DEFAULT (256ull << 20)

struct srv_out;
struct srv_ckpt_cache;
struct srv_kept_images;

/*
 * The executor's barrier (hold.c): a checkpoint asks the executor to stop between two frames
 * and run work there; work returns SRV_HOLD_KEEP to stay held until srv_hold_release(), or
 * SRV_HOLD_RELEASE (or an error) to carry on at once.
 */
#define SRV_HOLD_RELEASE 0
#define SRV_HOLD_KEEP 1
struct srv_worker;
struct srv_hold {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_int want;     /* a hold is asked for */
	int parked;          /* the executor is at the barrier */
	int done;            /* the work ran */
	int release;         /* the requester let a kept hold go */
	int work_ret;
	int (*work)(struct srv_worker *w, void *arg);
	void *arg;
};

/* A module global the driver placed elsewhere in a restored job: the client's address, where
 * it is now (window_map.c translates every address the client names in it). */
struct srv_gmove {
	uint64_t addr, now, size;
	uint64_t module; /* its module or library: the translation goes when it is unloaded */
};

#define SRV_JOB_ID_LEN 16
#define SRV_TOKEN_LEN 32

struct srv_worker {
	const struct srv_config *cfg;
	uint64_t session;
	struct srv_driver drv;

	/*
	 * The job's link to its client (link.c). Every frame sent is kept until the client has
	 * acknowledged receiving it, so a broken link loses nothing: the client reconnects,
	 * presents its token, and both sides resend what the other has not seen.
	 */
	pthread_mutex_t send_lock;   /* conn writes, the resend list, tx_seq */
	pthread_cond_t out_cond;     /* room in the resend list */
	struct rgpu_conn *conn;      /* NULL while the link is down */
	/*
	 * lanes (transport/lanes.c): the link_id of the client's hello that opened the link, and how
	 * many lanes it has (the link's socket counted); its lanes attach to it (take_lane), under
	 * lanes_lock (not send_lock: a resume's resend may hold that while the client, opening its
	 * lanes, reads nothing)
	 */
	pthread_mutex_t lanes_lock;
	uint8_t link_id[16];
	int lanes_want;
	struct rgpu_conn *lanes_conn; /* that link (NULL once it is closed) */
	struct srv_out *out_head, *out_tail;
	uint64_t out_bytes;          /* bytes copied into the resend list */
	uint64_t tx_seq;             /* last seq sent */
	uint64_t reader_skip_until;  /* a restored job: frames the reader consumes itself
					(callbacks done, host memory) up to here were applied
					before the checkpoint, and are not applied again */
	uint64_t caps;               /* capability bits this worker serves */
	uint64_t client_caps;        /* the bits the client announced (its MSG_HELLO) */
	uint64_t bytes_out;
	uint8_t job_id[SRV_JOB_ID_LEN];
	uint8_t token[SRV_TOKEN_LEN];
	/* another server's worker presents it to send this job copies (peer.c); the job's for
	 * its life here, a new one where it is restored */
	uint8_t peer_token[SRV_TOKEN_LEN];
	struct srv_peer *peer_links; /* links from and to other servers' workers (peer.c) */
	char job_hex[2 * SRV_JOB_ID_LEN + 1];
	uint64_t started_ns;         /* wall clock, for the job's age */
	char client_host[64], client_program[256], peer[96];
	pthread_mutex_t peer_lock; /* peer: the reader rewrites it as the link moves (srv_link_up) */
	char label[RGPU_LABEL_MAX + 1]; /* Hello.label (what the job belongs to), or empty */
	char tenant[65];         /* the authenticated tenant (RGPU_TENANT_MAX); "" without keys */
	int client_pid;
	atomic_int state;            /* enum srv_job_state */

	/* a resume handed over by the supervisor, for the reader to install */
	pthread_mutex_t link_lock;
	pthread_cond_t link_cond;
	struct rgpu_conn *pending;
	void *pending_hello;         /* Rgpu__Hello * */
	unsigned pending_gen;        /* token_gen when it was handed over */
	uint8_t pending_proof[32];   /* the server's proof for its reply (RGPU_AUTH_MAC_LEN) */
	int pending_has_proof;
	int ctl_fd;                  /* datagram socket to the supervisor */
	uint8_t token_prev[SRV_TOKEN_LEN]; /* still valid until the client speaks on a new link */
	atomic_int token_prev_ok;
	atomic_uint token_gen;       /* +1 at every new token */
	atomic_uint resumes;
	atomic_uint_fast64_t dev_bytes; /* device memory mapped for the job */
	atomic_uint_fast64_t dev_bytes_by[16]; /* the same by device (index in w->dev) */
	atomic_uint nobjs;

	/*
	 * The job's GPUs (devices.c): dev[i] is the one the client numbers dev_base + i, this
	 * server's GPU dev_ord[i]; all the server's GPUs, or those the client chose (its Hello), in
	 * its order. Messages and the state log name devices by the client's numbers:
	 * srv_dev_local() gives the index here, which srv_obj.device and srv_map.device hold.
	 */
	int ndev;
	CUdevice dev[16];
	int dev_ord[16];
	int dev_base;
	/* what the table is to hold, asked for before srv_worker_setup makes it: the server's
	 * ordinals, ndev_want of them (0: all the server's GPUs) */
	int dev_want[16];
	int ndev_want;
	CUcontext base_ctx;      /* the primary context of the job's first GPU (dev[0]), retained by
				    the worker (given up and taken again when the application
				    resets it) */
	CUdeviceptr window;

	/* client ids -> driver objects; window mappings (tsearch trees) */
	void *objs;
	void *maps;
	void *globals;           /* module globals the client has looked up (srv_map ranges) */
	uint64_t cur_ctx_id;     /* context current on the executor thread */

	/* first error of fire-and-forget work, reported with the next reply */
	CUresult async_err;

	/*
	 * The job's state log (statelog.c): every live object in creation order, recorded from
	 * the message table as the executor runs frames; the open capture journals and those of
	 * captured graphs. Executor thread only.
	 */
	struct st_log *log;
	struct rgpu_journals journals;    /* of captures in progress, graphs and execs (record.h) */
	int journal_off;         /* a replay's scratch build: frames change no journal or record */

	/*
	 * Graphs built node by node (exec_gnode.c): the node ids of each graph, which exec was
	 * instantiated from which graph, graph ids a replay redirects to a scratch build, and the
	 * stream a MSG_GRAPH_NODE's frames are captured on while it runs.
	 */
	struct srv_gnodes *gnodes;
	struct srv_gexec *gexecs;
	struct { uint64_t from, to; } gredir[4];
	int ngredir;
	struct srv_nstream *nstreams;
	CUstream node_stream;
	/* set by exec_gnode.c once it keeps anything: a graph or exec released, the worker's end */
	void (*graph_released)(struct srv_worker *w, int kind, uint64_t id);
	void (*graph_fini)(struct srv_worker *w);
	/* a replay: build a graph as its journal was (replay.c); NULL when serving a client */
	CUresult (*graph_at)(struct srv_worker *w, const struct Rgpu__GraphAt *at, uint64_t as_id);
	CUresult exec_result;    /* the frame being executed failed (srv_async_error, a reply) */
	/*
	 * Called by srv_reply with each reply before it is sent: the state log records a call
	 * there (statelog.c sets it; reply.c stays below the log and names nothing of it).
	 */
	void (*on_reply)(struct srv_worker *w, const struct srv_frame *f,
			 const ProtobufCMessage *rep);
	int exec_recorded;       /* its reply already recorded it */
	unsigned verified, mismatches; /* RGPU_VERIFY_LOG comparisons */
	size_t dump_max;         /* RGPU_STATE_DUMP: records in the largest log written */
	int replaying;           /* a replay: handlers run, nothing is sent */
	int restored;            /* rebuilt from a checkpoint (restore.c): no link yet */
	CUresult replay_result;  /* replaying: the result the handler would have replied */

	/*
	 * The reader -> executor queue, and what each of the two threads writes at every frame,
	 * each on cache lines of its own: a line both wrote would move between their CPUs at
	 * every frame. The executor takes everything queued at once into x_head (one lock per
	 * burst of frames, not per frame), and hands the frames it ran back, a batch at a time,
	 * on retired: the reader made their allocations, so the reader frees them, into its own
	 * arena and off the executor's time.
	 */
	_Alignas(64) pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct srv_frame *q_head, *q_tail;
	int q_sleeping;            /* the executor sleeps on q_cond (q_lock) */
	int q_closed;            /* the reader is done (EOF or protocol error) */
	int q_warned;            /* the reader said once that it stopped for the bound */
	_Atomic(struct srv_frame *) retired; /* run, for the reader to free */
	_Atomic int64_t retired_bytes;       /* their bodies and payloads */
	/* -- the reader's: frames and bytes queued, ever; what waits is q_in - q_out
	 * (srv_queued); it stops reading while more than limits.queued bytes wait */
	_Alignas(64) _Atomic uint64_t q_in, q_in_bytes;
	uint64_t q_out_seen;       /* its last look at q_out_bytes */
	/* last client seq received; a host-memory frame's is counted with its write, under the
	 * host area's lock, so a checkpoint sees the two together */
	atomic_uint_fast64_t rx_seq;
	uint64_t bytes_in;
	/* --idle-timeout: idle when nothing runs and no frame came since active_ns, or
	 * since the executor finished one (ex_active_ns) */
	atomic_uint_fast64_t active_ns;
	/* -- the executor's: frames and bytes run, ever */
	_Alignas(64) _Atomic uint64_t q_out, q_out_bytes;
	struct srv_frame *x_head;  /* taken, not yet run */
	struct srv_frame *x_retired; /* run, not yet handed back (x_nretired of them, with
					x_retired_bytes of bodies and payloads) */
	unsigned x_nretired;
	uint64_t x_retired_bytes;
	atomic_int executing;    /* running a frame */
	atomic_uint_fast64_t executed; /* last client seq it has run */
	atomic_uint_fast64_t ack_told; /* last `executed` value sent to the client */
	uint64_t ack_ns;             /* when it last sent an acknowledgement */
	atomic_uint_fast64_t ex_active_ns;
	/* the reader waits for room (q_cond): it writes this rarely, the executor reads it at
	 * every frame */
	atomic_int q_room_wait;
	_Alignas(64) char q_end; /* (what follows starts on a line of its own) */

	/* host-function triggers waiting for MSG_CALLBACK_DONE */
	pthread_mutex_t cb_lock;
	pthread_cond_t cb_cond;
	uint64_t *cb_done;       /* ids acknowledged and not yet consumed */
	size_t cb_ndone, cb_cap;
	size_t cb_called;        /* callbacks sent to the client and not yet waited for */
	atomic_int dead;         /* the client is gone: stop waiting for it */
	atomic_int cb_waiting;   /* host functions waiting for the client (srv_wait_callback) */

	struct rgpu_spin_hint spin; /* held while the executor runs frames: the reader spins */
	/*
	 * What the executor knows of one context's streams (reply.c, srv_quiet_*): since its last
	 * cuCtxSynchronize, only copies on one stream were put on it, and (!pending) that stream
	 * was synchronized after them. A reply then says the context is idle (Status.idle_ctx).
	 */
	struct srv_quiet {
		int valid, pending, any;
		uint64_t ctx;   /* the client's id of the context */
		CUstream stream;
	} quiet;
	int refuse_new;          /* over --max-sessions: a new session refused, a resume routed */
	struct srv_limits limits; /* its tenant's, resolved (srv_limits_for) once authenticated */

	struct srv_hold hold;        /* the executor's barrier (hold.c) */
	atomic_int admin_busy;       /* an admin request (checkpoint, migration) is being served */
	struct srv_ckpt_cache *ckpt_cache; /* what checkpoints keep between them (ckpt.c) */
	struct srv_kept_images *kept_images; /* the job's module images (srv_ckpt_keep_image) */
	struct srv_gmove *gmoves;    /* a restored job's module globals placed elsewhere */
	size_t ngmoves;
	/* a restore: module images by hash for the replay (restore.c), else NULL */
	int (*image_lookup)(struct srv_worker *w, const uint8_t hash[32], void **data, size_t *len);

	struct srv_staging *staging;
	struct srv_shm *shm;         /* shared memory with a client on this host (shm.c) */
	atomic_int shm_pending;      /* a link to install before the next frame (srv_shm_point) */
	struct srv_hm *hm;           /* the host area (hostmirror.c) */
	struct rgpu_store *store;    /* the server's store, opened once (srv_worker_store) */
	pthread_mutex_t store_lock;
	struct srv_modcache *modcache;
	struct srv_stdio *stdio; /* the driver's stdout and stderr, for the client (stdio.c) */
};

enum srv_job_state {
	SRV_JOB_STARTING = 0,
	SRV_JOB_RUNNING = 1,
	SRV_JOB_DISCONNECTED = 2,  /* link lost; waiting for the client within the grace period */
	SRV_JOB_ENDING = 3,
};
const char *srv_job_state_name(int state);

/*
 * srv_worker_run() - serve the client on conn (a new job, or the resume of a job living in
 * another worker, which is handed over through the supervisor) until the job ends; never
 * returns (exits). ctl_fd is this worker's control channel to the supervisor. admit: 0 when
 * the server already serves --max-sessions jobs: a new session is refused in the handshake
 * (CUDA_ERROR_DEVICE_UNAVAILABLE), a resume is still routed to its job.
 */
void srv_worker_run(const struct srv_config *cfg, struct rgpu_conn *conn, int ctl_fd, int admit)
	__attribute__((noreturn));
/*
 * srv_worker_init() - what every worker starts with, a job's or a replay's: its configuration,
 * control channel (-1: none), peer name for logs, capabilities, locks and condition variables.
 */
void srv_worker_init(struct srv_worker *w, const struct srv_config *cfg, int ctl_fd,
		     const char *peer);
/*
 * srv_worker_setup() - the driver, the job's GPUs (what srv_dev_want or srv_dev_want_first asked
 * for, else all), the first one's primary context, the device window at its fixed base and the
 * staging buffers, as a worker sets them up before serving (worker.c). On failure *why says
 * what. Returns CUDA_SUCCESS or the CUDA error (CUDA_ERROR_INVALID_DEVICE: GPUs asked for that
 * the server does not have).
 */
CUresult srv_worker_setup(struct srv_worker *w, char *why, size_t whylen);

/* ---- the job's devices (devices.c) ------------------------------------------------------ */

/*
 * srv_dev_want() - a new job's Hello: the client numbers this server's GPUs from base and uses
 * the n of ordinals ords, in that order (n 0: all of them). Checks what needs no driver: the
 * client's numbers base..base+n-1 within its 16, each ordinal in 0..15 and named once; kept for
 * srv_dev_table(). Returns 0, or RGPU_EINVAL with why filled (for the client; nothing kept).
 */
int srv_dev_want(struct srv_worker *w, uint32_t base, const int32_t *ords, size_t n, char *why,
		 size_t whylen);
/*
 * srv_dev_want_first() - a restored or replayed job: numbered from base, on this server's first
 * n GPUs (n 0: all).
 */
void srv_dev_want_first(struct srv_worker *w, uint32_t base, size_t n);
/*
 * srv_dev_table() - srv_worker_setup, once it knows the server has nserver GPUs: the job's
 * table (w->ndev, w->dev_ord; the CUdevices are the caller's to look up) from what was asked.
 * Returns 0, or RGPU_EINVAL with why filled: an ordinal the server does not have, or all its
 * GPUs numbered from the base would pass the client's 16.
 */
int srv_dev_table(struct srv_worker *w, int nserver, char *why, size_t whylen);
/*
 * srv_dev_local() - the index in w->dev of the device the client numbers client_dev, or -1 when
 * it is not one of the job's here. what: the request, for the refusal's log line (said once per
 * job); NULL: say nothing.
 */
int srv_dev_local(struct srv_worker *w, int client_dev, const char *what);

/* ---- replay (replay.c) ------------------------------------------------------------------ */

/*
 * srv_replay_restore() - rebuild the job recorded in want on this worker: every record
 * re-created in creation order by running the request it came from through srv_exec()
 * (captured graphs from their capture journals), then checked: the worker's log must equal
 * want (same ids, fields and addresses) and the worker must hold every object and mapping. The worker must be set up
 * (srv_worker_setup, module cache, srv_log_init with an empty log) and have w->replaying set.
 * @journals, @jlen: the kept capture journals (RGPU_STATE_DUMP's .journals layout: per graph,
 *                   graph id and length as u64 LE, then the journal); NULL and 0 for none.
 *                   Those the replay does not make again (of graphs destroyed since, which
 *                   execs and clones are rebuilt from) are kept on the worker as they came.
 * @why, @whylen: on failure, one line naming the record that failed and why.
 * Returns 0 or RGPU_EINVAL (worker not ready), RGPU_ECUDA (a handler failed), RGPU_ENOTFOUND
 * (a module image or journal that is not here), RGPU_EUNSUPPORTED (a record this cannot
 * rebuild yet), RGPU_ECORRUPT (malformed journals, a journal whose hash differs, or a rebuilt
 * state that differs from want), RGPU_ENOMEM or RGPU_EPROTO (a handler refused a request).
 * A module global the driver placed elsewhere is no failure: its record keeps the address the
 * client holds, and w->gmoves translates that address for the driver (window_map.c).
 */
int srv_replay_restore(struct srv_worker *w, struct st_log *want, const uint8_t *journals,
		       size_t jlen, char *why, size_t whylen);
/*
 * srv_replay_file() - rgpud --replay: set up a worker as for a job, replay the state log in
 * path (and the capture journals beside it, path with .journals for .stlog) and print one line
 * saying what was rebuilt, or what failed. Returns the process exit status: 0 (equal), 3
 * (equal but for module globals the driver placed elsewhere, each named) or 1 (failed).
 */
int srv_replay_file(const struct srv_config *cfg, const char *path);

/*
 * Sending (any thread; link.c). ref: the request a reply or pushed data belongs to (0 for
 * none); replies set RGPU_FRAME_REPLY. The frame is kept for resending until the client
 * acknowledges it, so this succeeds while the link is down; RGPU_ECLOSED once the job ends.
 */
int srv_send(struct srv_worker *w, uint16_t type, uint32_t flags, uint64_t ref,
	     const ProtobufCMessage *body, const void *payload, uint64_t plen);
/*
 * srv_send_staged() - the same for a payload in a staging buffer, which the call takes over:
 * a large one is kept (not copied) until the client has it, a small one copied and returned.
 */
int srv_send_staged(struct srv_worker *w, uint16_t type, uint64_t ref,
		    const ProtobufCMessage *body, void *buf, uint64_t plen);
/* srv_link_acked() - the client has received everything through seq: drop it (reader) */
void srv_link_acked(struct srv_worker *w, uint64_t seq);
/* srv_link_ack() - tell the client how far the executor got, if it does not know yet */
void srv_link_ack(struct srv_worker *w);
/* srv_link_down() - the link broke: stop writing, keep everything for the resume */
void srv_link_down(struct srv_worker *w);
/* srv_link_lanes_said() - log where the link's striped payloads spent their time (at info,
 * when there were any: rgpu_lanes_stats), as the job ends */
void srv_link_lanes_said(struct srv_worker *w);
/*
 * srv_link_up() - install a new link after a resume: frames after client_received are
 * written again. Returns 0 or the send error.
 */
int srv_link_up(struct srv_worker *w, struct rgpu_conn *c, uint64_t client_received);
/* srv_link_end() - the job ends: wake every sender waiting for room, free the list */
void srv_link_end(struct srv_worker *w);
/* Replies and errors (reply.c). */
/*
 * srv_reply() - send rep as the reply to f, with the pending asynchronous error put in its
 * field 2 (every reply message has `result` as field 1 and `async_error` as field 2).
 */
int srv_reply(struct srv_worker *w, const struct srv_frame *f, ProtobufCMessage *rep);
int srv_reply_status(struct srv_worker *w, const struct srv_frame *f, CUresult r);
/*
 * srv_quiet_*() - keep w->quiet (executor thread): a context synchronized (r: how it went), a
 * copy on stream s of context ctx (synced: s was synchronized after it), a stream
 * synchronized, or anything else put on a stream (off). srv_quiet_idle(): the context idle
 * now, or 0.
 */
void srv_quiet_ctx_synced(struct srv_worker *w, uint64_t ctx, CUresult r);
void srv_quiet_copy(struct srv_worker *w, uint64_t ctx, CUstream s, int synced, CUresult r);
void srv_quiet_stream_synced(struct srv_worker *w, uint64_t ctx, CUstream s, CUresult r);
void srv_quiet_off(struct srv_worker *w);
uint64_t srv_quiet_idle(const struct srv_worker *w);
/* srv_reply_data() - a Status whose payload is data (len bytes; none when r failed) */
int srv_reply_data(struct srv_worker *w, const struct srv_frame *f, CUresult r,
		   const void *data, uint64_t len);
int srv_reply_value(struct srv_worker *w, const struct srv_frame *f, CUresult r, int64_t v);
void srv_protocol_error(struct srv_worker *w, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * srv_end_session() - tell the client why its job ends (MSG_ERROR with code and msg,
 * unsequenced), close the link and end the job; logging is the caller's.
 */
void srv_end_session(struct srv_worker *w, int code, const char *msg);
/* srv_async_error() - remember the first error of fire-and-forget work */
void srv_async_error(struct srv_worker *w, CUresult r, const char *what);
/* srv_take_async_error() - the remembered error, cleared */
CUresult srv_take_async_error(struct srv_worker *w);

/* Objects (objects.c; executor thread only). */
struct srv_obj *srv_obj_find(struct srv_worker *w, uint64_t id, int kind);
/*
 * srv_obj_create() - register a driver object the handler just made under the client's id.
 * On failure the driver object is released (srv_obj_release) and the CUDA error to report is
 * returned: CUDA_ERROR_INVALID_HANDLE for an id in use, CUDA_ERROR_OUT_OF_MEMORY. Its record
 * is added to the state log by the executor once the handler succeeded (statelog.c).
 */
CUresult srv_obj_create(struct srv_worker *w, const struct srv_obj *o);
/*
 * srv_obj_release() - release the driver object behind o and forget it, a module with the
 * globals looked up in it (the log's removal hook calls it for every record a destroy takes
 * with it). Errors become asynchronous errors.
 */
void srv_obj_release(struct srv_worker *w, struct srv_obj *o);
void srv_obj_del(struct srv_worker *w, uint64_t id);
/* srv_use_ctx() - make client context id current on the executor; CUDA error if unknown */
CUresult srv_use_ctx(struct srv_worker *w, uint64_t ctx);
/*
 * srv_use_ctx_or_base() - srv_use_ctx, and for ctx 0 the job's first GPU's primary context
 * (the worker's own reference): a library's __managed__ variables, which the runtime looks up before any
 * context exists, and the copies of their bytes.
 */
CUresult srv_use_ctx_or_base(struct srv_worker *w, uint64_t ctx);
/* srv_stream() - the driver stream for a client stream id (0: the NULL stream) */
CUresult srv_stream(struct srv_worker *w, uint64_t id, CUstream *out);
/*
 * Collecting the ids of the objects of one client context (or of all, COLLECT_ALL), to destroy
 * them after the walk: set srv_collect_arg, then twalk(w->objs, srv_collect_walk); free ids after.
 */
#define COLLECT_ALL UINT64_MAX
struct collect {
	uint64_t ctx;
	uint64_t *ids;
	size_t n, cap;
};
extern struct collect *srv_collect_arg;
void srv_collect_walk(const void *node, VISIT which, int depth);

/* Host-function triggers (exec_launch.c): a driver thread waits for the reader's word. */
int srv_wait_callback(struct srv_worker *w, uint64_t id);
int srv_callback_done(struct srv_worker *w, uint64_t id);

/* Executing one frame (exec.c): 0, or a negative RGPU_E* code that ends the session. */
int srv_exec(struct srv_worker *w, struct srv_frame *f);

/* ---- the job's state log (statelog.c; executor thread only) ---------------------------- */

/* srv_log_init() - an empty log; RGPU_ENOMEM. srv_log_fini() frees it and every journal. */
int srv_log_init(struct srv_worker *w);
void srv_log_fini(struct srv_worker *w);
/*
 * srv_log_record() - record what frame f did, from the table's effect and the builders
 * (rgpu/record.h): rep is the reply sent (NULL for fire-and-forget work). Creates and
 * attributes are recorded only when the handler succeeded; a destroy releases every object the
 * removal takes with it, dependents first. Also keeps the capture journals.
 */
void srv_log_record(struct srv_worker *w, const struct srv_frame *f, const ProtobufCMessage *rep);
/*
 * srv_log_verify() - RGPU_VERIFY_LOG: f carries the client's digest of its log as it was when
 * it sent f. Returns 1 when it equals this worker's (or f carries none), 0 when not: the
 * mismatch is logged and *serialized (malloc'd, the caller frees) holds this log for the
 * client to compare.
 */
int srv_log_verify(struct srv_worker *w, const struct srv_frame *f, uint8_t **serialized,
		   size_t *len);
/*
 * srv_log_dump() - RGPU_STATE_DUMP=DIR (tests): when the log holds more records than it ever
 * did, write it to DIR/JOB.stlog (a sealed statetrack stream), the kept capture journals to
 * DIR/JOB.journals and, for a job whose client numbers its devices from a base or chose some,
 * DIR/JOB.devices (one line: SRV_DUMP_DEVICES_MAGIC " base=B count=N"), for the replay tests
 * (rgpud --replay). Nothing without the variable.
 */
#define SRV_DUMP_DEVICES_MAGIC "rgpu-devices 1"
void srv_log_dump(struct srv_worker *w);
/* srv_log_journal() - the kept capture journal of graph id, or NULL */
const struct rgpu_journal *srv_log_journal(struct srv_worker *w, uint64_t graph);

/* ---- graphs built node by node (exec_gnode.c) ------------------------------------------- */
/* The node ids of a graph die with it; an exec's note (and a replay's scratch graph) with it. */
void srv_gnodes_forget(struct srv_worker *w, uint64_t graph);
void srv_gexec_forget(struct srv_worker *w, uint64_t exec);
/* srv_gexec_note() - exec was instantiated from graph (its nodes name the exec's). */
int srv_gexec_note(struct srv_worker *w, uint64_t exec, uint64_t graph, uint64_t flags);
/* srv_gexec_own() - a replay's scratch graph that exec was instantiated from goes with it. */
void srv_gexec_own(struct srv_worker *w, uint64_t exec, uint64_t scratch);
/* srv_gnodes_capture() - graph is being captured on s (NULL: no longer). */
void srv_gnodes_capture(struct srv_worker *w, uint64_t graph, CUstream s);
/* srv_graph_redirect() - the id a graph id names now (a replay's scratch build), or id. */
uint64_t srv_graph_redirect(const struct srv_worker *w, uint64_t id);
/* srv_capture_to_graph() - cuStreamBeginCaptureToGraph(s, graph, its nodes deps, mode). */
CUresult srv_capture_to_graph(struct srv_worker *w, CUstream s, uint64_t graph,
			      const uint64_t *deps, size_t n, unsigned mode);
/* srv_gnodes_fini() - everything above, at the worker's end. */
void srv_gnodes_fini(struct srv_worker *w);

/* ---- the device window and its mappings (window_map.c; executor thread only) ----------- */

/* srv_in_window() - does [addr, addr+size) lie in the window (and size > 0)? */
int srv_in_window(struct srv_worker *w, uint64_t addr, uint64_t size);
/*
 * srv_dev_range_ok() - may the client name [addr, addr+size) as device memory: the window, or a
 * module global it has looked up?
 */
int srv_dev_range_ok(struct srv_worker *w, uint64_t addr, uint64_t size);
/*
 * srv_remember_global() - the client has looked up the global [addr, addr+size) of module (a
 * module or library id): it may name it until srv_forget_globals(w, module).
 */
void srv_remember_global(struct srv_worker *w, uint64_t module, uint64_t addr, uint64_t size);
/* srv_forget_globals() - module is unloaded: its globals are no longer the job's memory */
void srv_forget_globals(struct srv_worker *w, uint64_t module);
/*
 * srv_map_range() - back [addr, addr+size) of the window with memory of w->dev[device] (the
 * index, not the client's number); both granule aligned, not overlapping a live mapping. CUDA_ERROR_INVALID_VALUE for a bad range, else the
 * driver's error.
 */
CUresult srv_map_range(struct srv_worker *w, uint64_t addr, uint64_t size, int device);
/* srv_mapped() - is [addr, addr+size) exactly one live mapping? */
int srv_mapped(struct srv_worker *w, uint64_t addr, uint64_t size);
/* srv_map_find() - the live mapping that is exactly [addr, addr+size), or NULL */
const struct srv_map *srv_map_find(struct srv_worker *w, uint64_t addr, uint64_t size);
/*
 * srv_map_app() - the application's cuMemMap: map [offset, offset+size) of the physical memory
 * pm (an ST_KIND_PHYSMEM object) at [addr, addr+size) of the window, with no access yet. All
 * three granule aligned, inside the window and the memory, not overlapping a live mapping:
 * else CUDA_ERROR_INVALID_VALUE; or the driver's error.
 */
CUresult srv_map_app(struct srv_worker *w, uint64_t addr, uint64_t size, uint64_t offset,
		     const struct srv_obj *pm);
/*
 * srv_unmap_range() - release the mapping that is exactly [addr, addr+size), after the current
 * context's pending work, and the physical memory it owns (an application's mapping owns none:
 * its memory goes with its own record); CUDA_ERROR_INVALID_VALUE when there is no such mapping.
 */
CUresult srv_unmap_range(struct srv_worker *w, uint64_t addr, uint64_t size);

/*
 * srv_maps_list() - a copy of the window's live mappings, by address (malloc'd; *n of them).
 * Returns 0 or RGPU_ENOMEM.
 */
int srv_maps_list(struct srv_worker *w, struct srv_map **out, size_t *n);
/*
 * srv_dev_translate() - the address the driver knows for client address addr: addr itself,
 * but inside a module global the driver placed elsewhere in a restored job (w->gmoves), where
 * that global is now. srv_dev_range_ok() passes such a range too.
 */
uint64_t srv_dev_translate(struct srv_worker *w, uint64_t addr);
/*
 * srv_dev_range() - srv_dev_range_ok() for request `what`, refused with one warning per session,
 * and *addr translated (srv_dev_translate) when it may. 1 or 0.
 */
int srv_dev_range(struct srv_worker *w, const char *what, uint64_t *addr, uint64_t size);
/*
 * srv_translate_params() - a launch's packed parameters: every 8-byte aligned word equal to an
 * address inside a moved global is rewritten (nothing when no global moved).
 */
void srv_translate_params(struct srv_worker *w, void *params, uint64_t len);

/* ---- the barrier (hold.c) ---------------------------------------------------------------- */

/*
 * srv_hold() - ask the executor to stop before its next frame and run work(w, arg) there; wait
 * until it ran (its return in *work_ret). Gives up with RGPU_ETIMEDOUT if the executor has not
 * stopped within timeout_ms (a frame that runs long), RGPU_EBUSY when another hold is on,
 * RGPU_ECLOSED when the job ends. 0: the work ran; with SRV_HOLD_KEEP the job stays held until
 * srv_hold_release().
 */
int srv_hold(struct srv_worker *w, int (*work)(struct srv_worker *w, void *arg), void *arg,
	     int timeout_ms, int *work_ret);
void srv_hold_release(struct srv_worker *w);
int srv_hold_is_parked(struct srv_worker *w);
/* the executor, between frames: run the work asked for, and stay while it is kept */
void srv_hold_point(struct srv_worker *w);
int srv_hold_wanted(struct srv_worker *w);

/* ---- checkpoints (ckpt.c), restore (restore.c), the job's admin requests (admin.c) ------- */

struct rgpu_conn;
struct rgpu_store;
struct srv_ckpt_direct;
/* What a checkpoint did, for its reply. */
struct srv_ckpt_result {
	uint64_t id;              /* in this server's store */
	uint64_t chunks, new_chunks, new_bytes, stored_bytes, device_bytes, records;
	uint64_t pause_ns, duration_ns;
	uint64_t array_bytes;     /* of device_bytes: CUDA arrays' elements */
	int snapshot;             /* the job ran on while the snapshot drained */
};
/*
 * srv_ckpt_take() - checkpoint the job into this server's store: hold it at the barrier,
 * synchronise, hash its device memory on the GPU, copy the chunks the store lacks into a
 * device snapshot (when the GPU has room: the job then runs on) or out while it waits, and
 * commit the manifest. keep_held: the job stays held after the commit (a migration), until
 * srv_hold_release(). progress: an admin connection for PROGRESS frames, or NULL. Returns 0 or
 * an RGPU_E* code with why filled; nothing is committed on failure and the job carries on.
 */
int srv_ckpt_take(struct srv_worker *w, struct rgpu_store *store, int keep_held,
		  struct rgpu_conn *progress, struct srv_ckpt_result *res,
		  struct srv_ckpt_direct *dx, char *why, size_t whylen);
/*
 * A live migration round's device memory (design.md §8): not written to the store but sent from
 * the GPU to the target. Given to srv_ckpt_take(), which commits the host-side parts and a
 * manifest whose device hashes are in its metadata (CkptMeta.device_hashes), and keeps here what
 * the send needs: the hashes at the cut, and a snapshot on the GPU of the chunks that differ
 * from `have` when there was room (then the job runs on; else a round's bytes are read from the
 * running job, and the target keeps what it got and says so next round). A switchover's job
 * (keep_held) stays held and its bytes are read as they are.
 */
struct srv_ckpt_direct {
	const uint8_t *have;  /* in: the device hashes last sent to the target, or NULL */
	size_t nhave;
	uint8_t *hash;        /* the device chunks' hashes at the cut, in device order */
	uint64_t *addr;       /* each chunk's address in the job */
	uint64_t *src;        /* where its bytes are now: in the snapshot, or 0 (the job) */
	size_t n;
	CUdeviceptr snap;
	int held;             /* the job stays held (a switchover): every byte read is the cut's */
};
/*
 * srv_ckpt_direct_send() - send the device chunks the target wants (bitmap want, n bits) with
 * send(arg, index, bytes, CH, exact), or bytes NULL for an all-zero chunk, from the snapshot or
 * the job (exact: the bytes are the cut's), on the drain threads (send is called from several at
 * once). progress: PROGRESS frames, or
 * NULL. 0, or an RGPU_E* code (why filled).
 */
typedef int (*srv_direct_send_fn)(void *arg, uint64_t index, const void *bytes, size_t len,
				  int exact);
int srv_ckpt_direct_send(struct srv_worker *w, const struct srv_ckpt_direct *dx,
			 const uint8_t *want, srv_direct_send_fn send, void *arg,
			 struct rgpu_conn *progress, uint64_t *bytes, char *why, size_t whylen);
/* srv_ckpt_direct_free() - the snapshot and the lists freed (the hold is the caller's) */
void srv_ckpt_direct_free(struct srv_worker *w, struct srv_ckpt_direct *dx);
/*
 * CUDA arrays in checkpoints (ckpt_array.c; the blob: docs/formats.md, "CUDA array blobs").
 * srv_array_saved() - whether record rec's contents are a blob of their own: an array that is
 * not a level of a mipmapped array, or a mipmapped array (its blob holds every level).
 * srv_array_save() - read the live array of rec whole (every level, layer, face and slice) into
 * a malloc'd blob *out of *len bytes, *elems of them its elements; the job must be synchronised
 * (the barrier). Leaves the base context current.
 * srv_array_expect() - whether a blob of size bytes can hold the rebuilt job's array of rec
 * (before it is read); why names the array.
 * srv_array_load() - check that blob b of len bytes describes exactly the rebuilt job's array of
 * rec (format, channels, flags, levels, every level's extent, the byte count), then write its
 * elements into the array.
 * Each returns 0 or an RGPU_E* code with why filled (RGPU_ECORRUPT: a blob that does not match,
 * RGPU_ECUDA: the driver failed, RGPU_ENOMEM).
 */
int srv_array_saved(const struct st_rec *rec);
int srv_array_save(struct srv_worker *w, const struct st_rec *rec, uint8_t **out, size_t *len,
		   uint64_t *elems, char *why, size_t whylen);
int srv_array_expect(struct srv_worker *w, const struct st_rec *rec, uint64_t size, char *why,
		     size_t whylen);
int srv_array_load(struct srv_worker *w, const struct st_rec *rec, const uint8_t *b, size_t len,
		   char *why, size_t whylen);
/*
 * srv_array_level_extent() - the extent of level `level` of mipmapped array mm, as its srv_obj's
 * extent (width in bytes, height, depth or layers): each dimension halves, down to 1; layers and
 * cube faces do not (exec_array.c).
 */
void srv_array_level_extent(const struct srv_obj *mm, unsigned level, uint64_t out[3]);
/*
 * srv_ckpt_keep_image() - keep a module image the driver loaded for the job, for its checkpoints:
 * in a file of the worker's own, so that a checkpoint has the bytes even when the module cache
 * evicted the image or never held it. Once per hash; a failure is logged once, and checkpoints
 * then look in the module cache.
 */
void srv_ckpt_keep_image(struct srv_worker *w, const uint8_t hash[32], const void *data,
			 size_t len);
/*
 * srv_store_open() - this server's store (DATA/store: the checkpoints and the module cache);
 * why filled on error. A process opens it once: a worker uses srv_worker_store().
 */
int srv_store_open(const struct srv_config *cfg, struct rgpu_store **out, char *why,
		   size_t whylen);
/*
 * srv_ckpt_release() - the buffers srv_ckpt_take() keeps for the next one (pinned memory, streams,
 * encoders) freed: after an operator's checkpoint, after a migration that failed.
 */
void srv_ckpt_release(struct srv_worker *w);
/*
 * srv_telemetry_fill() - g's telemetry fields (power, utilisation, memory, clocks,
 * temperature) read through NVML now, or modelled (simulated set, or no NVML) from its jobs'
 * activity, jobs_in_bps bytes a second from their clients (telemetry.c).
 */
struct Rgpu__GpuInfo;
void srv_telemetry_fill(struct Rgpu__GpuInfo *g, double jobs_in_bps, int simulated);
/*
 * The /metrics endpoint (metrics.c): srv_metrics_start() listens on cfg->metrics (nothing
 * when NULL) and gives the descriptor the supervisor polls (*fd, -1 when off), on which
 * srv_metrics_run() serves what is ready; srv_metrics_timeout_ms() bounds the poll (-1: no
 * bound). fn builds the page (malloc'd text, its length), or NULL. Returns 0 or an exit status.
 */
typedef char *(*srv_metrics_fn)(size_t *len);
int srv_metrics_start(const struct srv_config *cfg, srv_metrics_fn fn, int *fd);
int srv_metrics_timeout_ms(void);
void srv_metrics_run(void);
void srv_metrics_stop(void);
/* the server is drained (rgpuctl drain): set in the supervisor, inherited by its workers */
extern int srv_server_drained;

/*
 * Reservations (resv.c; admin RESERVE): GPU memory set aside by name for a batch job, kept by the
 * supervisor in memory and in STATE/reservations. srv_resv_load() reads the file at start;
 * srv_resv_apply() makes, resizes or (release) ends one by the rules of proto/admin.proto's
 * ReserveRequest, saved before it counts (why filled on error); srv_resv_view() points the
 * messages v (their array vp, max of each) at the list and returns how many.
 */
#define SRV_MAX_RESV 64
struct srv_resv {
	char name[64];
	uint32_t gpu;
	uint64_t bytes, created_ms;
};
struct Rgpu__Reservation;
void srv_resv_load(const char *state_dir);
int srv_resv_apply(const char *state_dir, const char *name, uint32_t gpu, uint64_t bytes,
		   int release, unsigned ngpus, int drained, char *why, size_t len);
size_t srv_resv_view(struct Rgpu__Reservation *v, struct Rgpu__Reservation **vp, size_t max);
/* srv_resv_unmapped() - GpuInfo.memory_reserved of GPU gpu; mapped(): what a label's jobs map */
uint64_t srv_resv_unmapped(unsigned gpu, uint64_t (*mapped)(const char *label, unsigned gpu));

/* srv_worker_store() - the worker's w->store, opened at the first call; why filled on error */
int srv_worker_store(struct srv_worker *w, char *why, size_t whylen);
/*
 * srv_worker_modcache() - open w->modcache in the worker's store, if the server has a data
 * directory and a module cache, and it is not open yet; a failure is said at warn, with
 * `without` (what the job does without the cache).
 */
void srv_worker_modcache(struct srv_worker *w, const char *without);
/*
 * srv_worker_admin() - the control thread was handed an admin request for this job (type, its
 * body, the connection fd to answer on, the supervisor's proof for the reply or NULL): served
 * on a thread of its own. Refused (answered with an error) while another one is served.
 */
void srv_worker_admin(struct srv_worker *w, int fd, unsigned type, const uint8_t *body,
		      size_t len, const uint8_t *proof);
/*
 * srv_peer_open() - an admin conversation with another server (a migration's target), as this
 * server's operator: rgpud --admin-key, and TLS with --peer-tls-ca when this server speaks TLS.
 */
struct rgpu_admin;
int srv_peer_open(const struct srv_config *cfg, const char *target, struct rgpu_admin **a,
		  char *err, size_t errlen);
/* srv_ctl_moved() - tell the supervisor that job_id now lives at addr (CTL_MOVED) */
void srv_ctl_moved(struct srv_worker *w, const uint8_t *job_id, const char *addr);
/*
 * srv_restore_run() - a new worker process for a pushed checkpoint (the admin request PUSH on
 * c, header h, decoded req): take the checkpoint into this server's store and, if asked,
 * restore it as a job waiting for its client at listen ("HOST:PORT", unless the request names
 * the client's address); never returns.
 */
struct Rgpu__PushRequest;
void srv_restore_run(const struct srv_config *cfg, struct rgpu_conn *c,
		     const struct rgpu_frame_hdr *h, struct Rgpu__PushRequest *req,
		     const uint8_t *proof, int ctl_fd, const char *listen) __attribute__((noreturn));
/* srv_worker_report() - tell the supervisor about the job now (its id, state, memory) */
void srv_worker_report(struct srv_worker *w);
/*
 * srv_worker_serve() - the job is set up (a handshake, or a restore): run it until it ends,
 * then exit. Never returns.
 */
void srv_worker_serve(struct srv_worker *w) __attribute__((noreturn));

/* The kept frames (link.c), for a checkpoint: as sent, each preceded by its seq and length
 * (u64 LE); *sent: the last seq sent. srv_link_kept_load() installs them in a restored job. */
int srv_link_kept_save(struct srv_worker *w, uint8_t **buf, size_t *len, uint64_t *sent);
int srv_link_kept_load(struct srv_worker *w, const uint8_t *buf, size_t len, uint64_t sent);

/* ---- copies between two servers' workers (peer.c) ------------------------------------------ */

/* payload bytes one peer link may queue ahead of the executor before its reader stops reading */
#define SRV_PEER_MAX_QUEUED (64ull << 20)
struct srv_peer;
struct srv_plink;
/*
 * srv_peer_init() - the job's peer state (w->peer_links), before its threads start: a link
 * queues at most max_queued bytes (0: SRV_PEER_MAX_QUEUED); a MSG_PEER_RECV waits at most
 * RGPU_PEER_TIMEOUT_MS (default 60000) for each chunk. Returns 0 or RGPU_ENOMEM.
 * srv_peer_fini() - the job ends: every link closed, its reader joined, every queue freed.
 */
int srv_peer_init(struct srv_worker *w, uint64_t max_queued);
/* srv_peer_token_new() - w->peer_token from getrandom: 0 or RGPU_ESYS */
int srv_peer_token_new(struct srv_worker *w);
void srv_peer_fini(struct srv_worker *w);
/*
 * srv_plink_add() - a link from src (for logs) whose Hello presented the job's peer token: c
 * becomes the link's. NULL with why filled (the job ends, too many links, no memory): c stays
 * the caller's. srv_plink_start() then starts its reader; RGPU_ESYS (logged) if it cannot, and
 * the link is gone.
 */
struct srv_plink *srv_plink_add(struct srv_worker *w, struct rgpu_conn *c, const char *src,
				char *why, size_t whylen);
int srv_plink_start(struct srv_worker *w, struct srv_plink *l);
/*
 * The queue of a link (the reader's side): srv_plink_wait_room() - wait while the link holds
 * more than its bound (RGPU_ECLOSED: the job ends). srv_plink_put() - len bytes at data (the
 * queue takes them over on 0) of copy id from off: 0, or RGPU_EPROTO with why filled for a
 * frame that must drop the link (empty; a copy received whole already; an offset that is not
 * where the copy goes on; past the copy's size once known; a copy that comes on another link),
 * or RGPU_ENOMEM. A copy whose receive failed takes its late bytes and drops them.
 * srv_plink_end() - the reader is done (broke: not a clean close by the source).
 * srv_plink_queued() - the bytes queued on l.
 */
int srv_plink_wait_room(struct srv_worker *w, struct srv_plink *l);
int srv_plink_put(struct srv_worker *w, struct srv_plink *l, uint64_t id, uint64_t off,
		  void *data, size_t len, char *why, size_t whylen);
void srv_plink_end(struct srv_worker *w, struct srv_plink *l, int broke, const char *why);
uint64_t srv_plink_queued(struct srv_worker *w, struct srv_plink *l);
/*
 * The executor's side. srv_peer_take() - the next chunk of copy id (size bytes; the chunk must
 * start at off), waiting for it up to the timeout: 0 with *data (malloc'd, the caller's) and
 * *len, or RGPU_ETIMEDOUT, RGPU_ECLOSED (its link ended, or the job ends), RGPU_EPROTO (bytes
 * past size), with why filled; src names the link once the copy was seen on one.
 * srv_peer_done() - copy id is over (ok: received whole): what is left of it is freed, and a
 * later frame of it drops its link (ok) or is dropped (not ok). srv_peer_seen() - was it?
 */
int srv_peer_take(struct srv_worker *w, uint64_t id, uint64_t size, uint64_t off, void **data,
		  size_t *len, char *src, size_t srclen, char *why, size_t whylen);
void srv_peer_done(struct srv_worker *w, uint64_t id, int ok);
int srv_peer_seen(struct srv_worker *w, uint64_t id);

/* ---- the driver's output, for the program (stdio.c) ----------------------------------- */

/*
 * srv_stdio_init() - when the job starts (the driver loaded): fd 1 and fd 2 become pipes that
 * the worker empties, the log keeps the original stderr. Returns 0, or RGPU_ESYS (nothing changed: the driver's output
 * stays on the server's stdout and stderr).
 */
int srv_stdio_init(struct srv_worker *w);
/*
 * srv_stdio_flush_point() - can executing a frame of this type make the driver flush its
 * device printf buffer? The synchronising requests (effect sync), MSG_MEMCPY_DTOH (a
 * synchronous one: the only kind answered), module load and unload, a context's destroy and
 * goodbye.
 */
int srv_stdio_flush_point(unsigned type);

/* ---- mapped host memory (hostmirror.c) ---------------------------------------------------- */

struct srv_hm;
/* srv_hm_init() - map the host area (a failure is logged and leaves it off). 0 or RGPU_ENOMEM. */
int srv_hm_init(struct srv_worker *w);
/* srv_hm_register() - register the area with the driver in the current (base) context. */
void srv_hm_register(struct srv_worker *w);
/* srv_hm_unregister() - undo srv_hm_register (before its context goes). */
void srv_hm_unregister(struct srv_worker *w);
/* srv_hm_frame() - the reader's MSG_HOST_MIRROR or MSG_HOST_WRITE. 0, or RGPU_EINVAL. */
int srv_hm_frame(struct srv_worker *w, const struct srv_frame *f);
/* srv_hm_sync() - send the client what the device changed in its regions (MSG_HOST_UPDATE). */
void srv_hm_sync(struct srv_worker *w);
/*
 * srv_hm_save() - the host area for a checkpoint (its regions, their bytes and the shadow;
 * malloc'd), and *received: the last client frame the reader took in, all the host-memory
 * frames up to it applied. srv_hm_load() puts such a copy back in a restored job's area.
 * 0, RGPU_ENOMEM, RGPU_ECORRUPT (load: not such a copy).
 */
int srv_hm_save(struct srv_worker *w, uint8_t **buf, size_t *len, uint64_t *received);
int srv_hm_load(struct srv_worker *w, const uint8_t *buf, size_t len);
/*
 * srv_stdio_flush() - send what the driver has written to stdout and stderr so far to the
 * client as MSG_OUTPUT (to the original stdout and stderr for a client without
 * RGPU_CAP_OUTPUT). Any thread; the executor calls it before the reply of a flush point. Does
 * nothing when srv_stdio_init() did not succeed.
 */
void srv_stdio_flush(struct srv_worker *w);

/* ---- control channel (ctl.c): supervisor <-> worker datagrams, rgpu.Ctl ---------------- */
struct Rgpu__Ctl;
/* srv_sendmsg_fd() - sendmsg of iov[n] on sock, with pass_fd attached unless it is -1 */
ssize_t srv_sendmsg_fd(int sock, struct iovec *iov, int n, int pass_fd);
/*
 * srv_recvmsg_fd() - recvmsg of up to len bytes into buf (flags as recvmsg's; EINTR retried):
 * the first descriptor that came with them goes to *fd if it is -1 (fd may be NULL), any
 * other is closed
 */
ssize_t srv_recvmsg_fd(int sock, void *buf, size_t len, int flags, int *fd);
/* srv_ctl_send() - one message, with pass_fd attached unless it is -1 */
int srv_ctl_send(int fd, const struct Rgpu__Ctl *m, int pass_fd);
/* srv_ctl_recv() - one message (and the descriptor that came with it, else -1) */
int srv_ctl_recv(int fd, struct Rgpu__Ctl **m, int *got_fd, int timeout_ms);

/* ---- staging (pinned bounce buffers) --------------------------------------------------- */
int srv_staging_new(struct srv_worker *w, int n, size_t size, struct srv_staging **out);
void *srv_staging_get(struct srv_staging *s);   /* blocks until one is free */
size_t srv_staging_size(const struct srv_staging *s); /* each buffer's bytes */
/*
 * one that holds len bytes, for the reader; NULL when all but two are in flight (those are the
 * executor's, which waits for them), or they are smaller
 */
void *srv_staging_tryget(struct srv_staging *s, size_t len);
void srv_staging_put(struct srv_staging *s, void *buf);
void srv_staging_free(struct srv_worker *w, struct srv_staging *s);
/*
 * srv_staging_renew() - the buffers go with the context (srv_base_ctx_renew): the reader gets
 * none from now on, the payloads of queued frames move to ordinary memory, and once every
 * buffer is back the worker's own are freed. srv_staging_refill() then makes n of size in the
 * new context (0, or RGPU_ENOMEM with none made). The pool itself stays, so that other threads
 * may keep using w->staging throughout. Executor.
 */
void srv_staging_renew(struct srv_worker *w);
int srv_staging_refill(struct srv_worker *w, int n, size_t size);
/*
 * srv_staging_adopt() - n buffers of size at base (shared memory the driver has registered)
 * become the pool; the worker's own go (freed now, or dropped when they come back). Executor.
 */
CUresult srv_staging_adopt(struct srv_worker *w, uint8_t *base, int n, size_t size);

/* ---- shared memory with a client on this host (shm.c) ---------------------------------- */
/* the socket local clients reach (supervisor.c); "" when there is none */
extern char srv_shm_socket[108];
/* srv_shm_attach() - an upgraded link's memory, for the executor to install (any thread) */
void srv_shm_attach(struct srv_worker *w, struct rgpu_shm_accepted *acc);
/* srv_shm_point() - the executor, before each frame: install an attached link */
void srv_shm_point(struct srv_worker *w);
/* srv_shm_arena_use() - register the client's arena allocation [off, +len): 1 when it is */
int srv_shm_arena_use(struct srv_worker *w, uint64_t off, uint64_t len);
/*
 * srv_shm_arena_at() - where [off, +len) of the client's arena lies here, inside its
 * allocation [reg_off, +reg_len) (registered); NULL when there is no arena or it is outside
 */
void *srv_shm_arena_at(struct srv_worker *w, uint64_t off, uint64_t len, uint64_t reg_off,
		       uint64_t reg_len);
/* srv_shm_ctx_renewed() - the base context was made again: registrations are gone */
void srv_shm_ctx_renewed(struct srv_worker *w);
/* srv_base_ctx_renew() - the job's first GPU's primary context torn down and taken again
 * (staging.c) */
int srv_base_ctx_renew(struct srv_worker *w);

/* ---- module image cache (tables of the server's store, shared by its workers; modcache.c) */
struct srv_modcache;
/*
 * srv_modcache_open() - the cache in the store's tables (created), holding at most max_bytes
 * of images: least recently used ones are evicted at once if it holds more. The store stays
 * the caller's, open while the cache is. Returns 0 or a negative RGPU_E* (said at err).
 */
int srv_modcache_open(struct rgpu_store *store, uint64_t max_bytes, struct srv_modcache **out);
/*
 * srv_modcache_get() - a malloc'd copy of the image named by hash, which becomes the most
 * recently used (and tenant's). tenant: only an image that tenant owns (has shipped itself) is
 * found; NULL: any (rgpud --replay). Returns 0, RGPU_ENOTFOUND (not cached, or not tenant's:
 * the two are not told apart), RGPU_ECORRUPT (a damaged entry, now deleted), RGPU_ENOMEM or
 * RGPU_ESYS.
 */
int srv_modcache_get(struct srv_modcache *mc, const char *tenant, const uint8_t hash[32],
		     void **data, size_t *len);
/*
 * srv_modcache_put() - keep an image the driver has loaded for tenant, evicting the least
 * recently used images until it fits the bound, and tenant's least recently used ones until it
 * owns at most tenant_max bytes (SRV_UNLIMITED: no limit). An image cached already is stored
 * once: it only becomes the most recently used, and tenant's. Returns 0, RGPU_ETOOBIG (larger
 * than the whole bound or than tenant_max: not cached, said once at warn), RGPU_ENOSPC or
 * RGPU_ESYS.
 */
int srv_modcache_put(struct srv_modcache *mc, const char *tenant, uint64_t tenant_max,
		     const uint8_t hash[32], const void *data, size_t len);
/* srv_modcache_usage() - the image bytes cached (headers not counted) and how many images */
int srv_modcache_usage(struct srv_modcache *mc, uint64_t *bytes, uint64_t *images);
/* srv_modcache_tenant_usage() - the same of the images tenant owns */
int srv_modcache_tenant_usage(struct srv_modcache *mc, const char *tenant, uint64_t *bytes,
			      uint64_t *images);
void srv_modcache_close(struct srv_modcache *mc);

#endif
