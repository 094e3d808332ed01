/* Names for the RGPU_E* codes. Every code in err.h must have an entry here (unit-tested). */
#include "rgpu/err.h"

const char *rgpu_strerror(int err)
{
	switch (err) {
	case RGPU_OK: return "success";
	case RGPU_EINVAL: return "invalid argument";
	case RGPU_ENOMEM: return "out of host memory";
	case RGPU_EIO: return "transport I/O error";
	case RGPU_EPROTO: return "protocol error: malformed frame or message";
	case RGPU_EVERSION: return "version mismatch";
	case RGPU_ETOOBIG: return "length beyond limit";
	case RGPU_ECLOSED: return "connection closed by peer";
	case RGPU_ETIMEDOUT: return "timed out";
	case RGPU_ECONNECT: return "cannot connect";
	case RGPU_ECUDA: return "CUDA driver error";
	case RGPU_ENOTFOUND: return "not found";
	case RGPU_EEXIST: return "already exists";
	case RGPU_ENOSPC: return "no space left";
	case RGPU_EUNSUPPORTED: return "not supported";
	case RGPU_EWINDOW: return "device address window not placed at its fixed base";
	case RGPU_ECORRUPT: return "data corrupt";
	case RGPU_ESYS: return "system call failed";
	case RGPU_EBUSY: return "busy";
	case RGPU_EUNKNOWNTYPE: return "unknown message type";
	case RGPU_EMAGIC: return "bad magic";
	case RGPU_ETRUNC: return "connection broken in the middle of a frame";
	case RGPU_EDEADLINE: return "frame not received whole in time";
	case RGPU_EAUTH: return "authentication failed";
	case RGPU_ETLS: return "TLS failed";
	case RGPU_EMOVED: return "the job moved to another server";
	case RGPU_ESTALE: return "the job's state changed since the target staged it";
	}
	return "unknown rgpu error";
}
