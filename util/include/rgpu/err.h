/*
 * One error space for all of rgpu (style.md): functions return 0 or a negative RGPU_E* code.
 * A CUDA or system error is kept as a cause beside the code, never returned raw.
 * The numbers cross process boundaries (protocol errors, logs): never renumber them.
 */
#ifndef RGPU_ERR_H
#define RGPU_ERR_H

enum rgpu_err {
	RGPU_OK = 0,
	RGPU_EINVAL = -1,      /* bad argument */
	RGPU_ENOMEM = -2,      /* host memory exhausted */
	RGPU_EIO = -3,         /* transport read/write failed (errno kept) */
	RGPU_EPROTO = -4,      /* malformed frame or message */
	RGPU_EVERSION = -5,    /* protocol or format version mismatch */
	RGPU_ETOOBIG = -6,     /* a length beyond its limit */
	RGPU_ECLOSED = -7,     /* peer closed the connection */
	RGPU_ETIMEDOUT = -8,   /* no answer in time */
	RGPU_ECONNECT = -9,    /* could not connect */
	RGPU_ECUDA = -10,      /* the CUDA driver failed (CUresult kept) */
	RGPU_ENOTFOUND = -11,  /* no such object */
	RGPU_EEXIST = -12,     /* already exists */
	RGPU_ENOSPC = -13,     /* address window or store full */
	RGPU_EUNSUPPORTED = -14, /* not implemented or not supported */
	RGPU_EWINDOW = -15,    /* the device VA window could not be placed at its fixed base */
	RGPU_ECORRUPT = -16,   /* stored data fails its checks */
	RGPU_ESYS = -17,       /* a system call failed (errno kept) */
	RGPU_EBUSY = -18,      /* resource in use */
	RGPU_EUNKNOWNTYPE = -19, /* frame of an unknown message type */
	RGPU_EMAGIC = -20,     /* stream or object does not start with its magic */
	RGPU_ETRUNC = -21,     /* the peer stopped in the middle of a frame (a broken link) */
	RGPU_EDEADLINE = -22,  /* a frame did not arrive whole within its time limit */
	RGPU_EAUTH = -23,      /* authentication failed or a key is unusable */
	RGPU_ETLS = -24,       /* TLS failed: no TLS peer, a bad certificate, or a TLS error */
	RGPU_EMOVED = -25,     /* the job moved to another server (a migration, a restore) */
	RGPU_ESTALE = -26,     /* a live migration's staged job no longer matches the job's state */
};

/* rgpu_strerror() - a short, stable name and description of an RGPU_E* code. */
const char *rgpu_strerror(int err);

#endif
