/*
 * The job's devices: which of this server's GPUs a job uses, and how the client numbers them.
 *
 * A client may use the GPUs of several servers at once (issue 13). It numbers all of them 0..N-1
 * and tells each server, in its Hello, its number for that server's first device
 * (Hello.device_base) and which of the server's GPUs it uses, in order (Hello.devices; empty:
 * all). Every device a message names is then the client's number, and so is every device in the
 * state log, which must stay equal to the client's own (RGPU_VERIFY_LOG) and be replayable on
 * another server. The worker keeps the job's GPUs in w->dev[] (index i: the client's
 * dev_base + i) and translates at each handler that takes a device from a message, through
 * srv_dev_local(); the objects it keeps (srv_obj.device, srv_map.device) hold that index.
 *
 * This file never calls the driver: srv_worker_setup() asks it for the table once it knows how
 * many GPUs the server has, and looks the CUdevices up itself. The unit tests call it as it is.
 */
#define LOG_PREFIX "worker: "
#include <stdio.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

int srv_dev_want(struct srv_worker *w, uint32_t base, const int32_t *ords, size_t n, char *why,
		 size_t whylen)
{
	const size_t max = ARRAY_SIZE(w->dev);

	/* the client holds at most max devices in all: its numbers are 0..max-1 */
	if (base >= max || n > max - base) {
		snprintf(
		    why, whylen,
		    "the client numbers this server's GPUs from %u and asks for %zu of them; a "
		    "client has at most %zu devices in all, numbered 0..%zu (Hello.device_base, "
		    "Hello.devices)",
		    base, n, max, max - 1);
		return RGPU_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (ords[i] < 0 || ords[i] >= (int32_t)max) {
			snprintf(why, whylen,
				 "the client asked for GPU %d of this server, which has "
				 "no such GPU (Hello.devices)",
				 ords[i]);
			return RGPU_EINVAL;
		}
		for (size_t j = 0; j < i; j++) {
			if (ords[j] == ords[i]) {
				snprintf(why, whylen,
					 "the client asked for GPU %d of this server "
					 "twice (Hello.devices)",
					 ords[i]);
				return RGPU_EINVAL;
			}
		}
	}
	w->dev_base = (int)base;
	w->ndev_want = (int)n;
	for (size_t i = 0; i < n; i++)
		w->dev_want[i] = ords[i];
	return 0;
}

void srv_dev_want_first(struct srv_worker *w, uint32_t base, size_t n)
{
	/*
	 * The server's first n GPUs, not the ordinals the job had where it ran: a target need not
	 * have those, and the client sees only its own numbers, which dev_base keeps.
	 */
	w->dev_base = (int)base;
	w->ndev_want = (int)MIN(n, ARRAY_SIZE(w->dev_want));
	for (int i = 0; i < w->ndev_want; i++)
		w->dev_want[i] = i;
}

int srv_dev_table(struct srv_worker *w, int nserver, char *why, size_t whylen)
{
	const int max = (int)ARRAY_SIZE(w->dev);
	int n = w->ndev_want ? w->ndev_want : MIN(nserver, max);

	for (int i = 0; i < w->ndev_want; i++) {
		if (w->dev_want[i] >= nserver) {
			snprintf(why, whylen,
				 "the client asked for GPU %d of this server, which has %d GPU%s "
				 "(0..%d)",
				 w->dev_want[i], nserver, nserver == 1 ? "" : "s", nserver - 1);
			return RGPU_EINVAL;
		}
	}
	/* all the server's GPUs, numbered from the base, must still fit the client's numbers */
	if (w->dev_base < 0 || w->dev_base + n > max) {
		snprintf(
		    why, whylen,
		    "the client numbers this server's %d GPUs from %d; a client has at most %d "
		    "devices in all: it must choose some of them (Hello.devices)",
		    n, w->dev_base, max);
		return RGPU_EINVAL;
	}
	for (int i = 0; i < n; i++)
		w->dev_ord[i] = w->ndev_want ? w->dev_want[i] : i;
	w->ndev = n;
	return 0;
}

int srv_dev_local(struct srv_worker *w, int client_dev, const char *what)
{
	/* in 64 bits: client_dev is the client's, any int32 */
	int64_t i = (int64_t)client_dev - w->dev_base;

	if (i >= 0 && i < w->ndev)
		return (int)i;
	if (what)
		pr_warn_once("job %s: %s refused: device %d is not one of the job's on this server "
			     "(%d..%d)",
			     w->job_hex, what, client_dev, w->dev_base, w->dev_base + w->ndev - 1);
	return -1;
}
