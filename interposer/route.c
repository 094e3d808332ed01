/*
 * Routing: which session a call goes to, when the program uses devices of several servers
 * (RGPU_SERVERS). Each server's session owns a run of the client's device numbers
 * (ip_session.dev_base, .ndev), and every object belongs to a context, which belongs to a
 * device: a call goes to the session of the device it acts on.
 *
 * An application thread's call is routed to the session of its current context unless the call
 * names something else: a stream, an event, a module, a context or a device address names the
 * device whose session executes it, and the code that resolves that handle routes the call
 * there (ip_route_ctx, ip_route_dev, ip_pin_dev). The route lasts until the next call starts
 * (ip_check_init clears it). A session's own threads (receiver, sender, callbacks) always work
 * for their session. With one server there is nothing to choose and none of this costs more
 * than a load and a branch.
 */
#include "session_state.h"
#include "rgpu/util.h"

static __thread struct ip_session *own, *pin, *route;
static signed char dev_sess[IP_MAX_DEVICES];  /* session index of each device */

static struct ip_session *dev_session(int d)
{
	if (d < 0 || d >= IP_MAX_DEVICES)
		return &ip_sessions[0];
	return &ip_sessions[dev_sess[d]];
}

struct ip_session *ip_sess_cur(void)
{
	struct ip_session *s;
	struct ip_ctx *c;

	if (ip_nsessions <= 1)
		return &ip_sessions[0];
	if ((s = own) || (s = pin) || (s = route))
		return s;
	c = ip_ctx_cur();
	return c ? dev_session(c->device) : &ip_sessions[0];
}

void ip_sess_bind(struct ip_session *s)
{
	own = s;
}

void ip_sess_enter(struct ip_session *s)
{
	pin = s;
}

int ip_pin_dev(int d)
{
	int prev = pin ? pin->index : -1;

	if (ip_nsessions > 1)
		pin = d < 0 ? NULL : dev_session(d);
	return prev;
}

int ip_pin_server(int k)
{
	int prev = pin ? pin->index : -1;

	if (ip_nsessions > 1)
		pin = k < 0 || k >= ip_nsessions ? NULL : &ip_sessions[k];
	return prev;
}

int ip_nservers(void)
{
	return ip_nsessions;
}

void ip_route_devices(int session, int dev_base, int ndev)
{
	for (int d = dev_base; d < dev_base + ndev && d < IP_MAX_DEVICES; d++)
		dev_sess[d] = (signed char)session;
}

void ip_route_clear(void)
{
	route = NULL;
}

void ip_route_dev(int d)
{
	if (ip_nsessions > 1)
		route = dev_session(d);
}

void ip_route_ctx(const struct ip_ctx *c)
{
	if (ip_nsessions > 1 && c)
		route = dev_session(c->device);
}

int ip_addr_device(uint64_t p)
{
	return ip_vaw_part_of(&ip.vaw, p);
}

int ip_dev_server(int d)
{
	return d >= 0 && d < IP_MAX_DEVICES ? dev_sess[d] : 0;
}

int ip_multi_server(void)
{
	return ip_nsessions > 1;
}

const char *ip_dev_server_name(int d)
{
	return dev_session(d)->server;
}
