/*
 * rocelab's librdmacm.so.1: rdma_cm on the soft-RNIC of the lab host the program runs
 * in (docs/rdmacm.md). Every identifier lives in the device's CM agent; the calls here
 * are the verbs service's CM calls (wire_cm.h) on the connection of the one device
 * context the library opens through rocelab's libibverbs.so.1, which is also the
 * context the application gets as id->verbs, so its QPs and the identifiers share one
 * connection and the agent can drive the QPs by their handles.
 *
 * An event channel's fd is a semaphore eventfd that the service increments once per
 * queued event: a read takes one event's token (blocking, or EAGAIN when the
 * application made the fd non-blocking), so poll and epoll see the fd readable exactly
 * while an event is pending.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../libibverbs/private.h"
#include "wire_cm.h"
#include "internal.h"

/* librdmacm's error convention: -1 with errno set. */
static int fail(int err)
{
	errno = err;
	return -1;
}

/* unsupported prints one line naming the call, at its first use of each call site. */
#define UNSUPPORTED(call)                                                                                              \
	do {                                                                                                           \
		static int told;                                                                                       \
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))                                                  \
			fprintf(stderr, "rocelab librdmacm: %s is not supported\n", call);                             \
	} while (0)

/* ---- the device ---- */

static pthread_mutex_t dev_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *dev;

/* device opens the lab host's device once per process (librdmacm's ucma_init). */
static struct ibv_context *device(void)
{
	pthread_mutex_lock(&dev_mu);
	if (!dev) {
		int n = 0;
		struct ibv_device **list = ibv_get_device_list(&n);
		if (list && n > 0)
			dev = ibv_open_device(list[0]);
		if (list)
			ibv_free_device_list(list);
		if (!dev)
			errno = ENODEV;
	}
	struct ibv_context *c = dev;
	pthread_mutex_unlock(&dev_mu);
	return c;
}

/* device_pd is librdmacm's PD of the device (ucma_get_device's cma_dev->pd): every
 * identifier's id->pd, the one rdma_create_qp and rdma_reg_msgs use without a PD of
 * the application's. It lives as long as the process. */
static struct ibv_pd *dev_pd;

static struct ibv_pd *device_pd(void)
{
	struct ibv_context *c = device();
	pthread_mutex_lock(&dev_mu);
	if (c && !dev_pd)
		dev_pd = ibv_alloc_pd(c);
	struct ibv_pd *pd = dev_pd;
	pthread_mutex_unlock(&dev_mu);
	return pd;
}

/* device_xrcd is the device's XRC domain for XRC_RECV identifiers (ucma_get_xrcd);
 * NULL with errno when the device has none to give. */
static struct ibv_xrcd *dev_xrcd;

static struct ibv_xrcd *device_xrcd(void)
{
	struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
				       .fd = -1,
				       .oflags = O_CREAT};
	pthread_mutex_lock(&dev_mu);
	if (dev && !dev_xrcd)
		dev_xrcd = ibv_open_xrcd(dev, &a);
	struct ibv_xrcd *x = dev_xrcd;
	pthread_mutex_unlock(&dev_mu);
	return x;
}

static int call(uint16_t op, const void *req, size_t reqlen, void *resp, size_t resplen, int sendfd)
{
	struct ibv_context *c = device();
	if (!c)
		return fail(ENODEV);
	int err = rocelab_call(c, op, req, reqlen, resp, resplen, sendfd);
	return err ? fail(err) : 0;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context *c = device();
	struct ibv_context **list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = c;
	if (num_devices)
		*num_devices = c ? 1 : 0;
	return list;
}

void rdma_free_devices(struct ibv_context **list) { free(list); }

/* ---- channels and identifiers ---- */

struct rl_cm_id;

/* A local event is one the library makes itself, not the CM agent: ADDR_RESOLVED of a
 * multicast destination and MULTICAST_JOIN (the kernel's rdma_cm has nothing to ask
 * the network for on RoCE). It waits on its channel's queue with a token on the
 * channel's eventfd, as the agent's events do; ev comes first, so that
 * rdma_ack_cm_event's free releases it. */
struct rl_local_event {
	struct rdma_cm_event ev;
	struct rl_local_event *next;
};

struct rl_cm_channel {
	struct rdma_event_channel ch;
	uint32_t h;
	pthread_mutex_t mu;
	struct rl_cm_id *ids;	      /* the channel's identifiers, for events to name them */
	struct rl_local_event *local; /* local events, oldest first */
	/* readers counts the threads inside rdma_get_cm_event. A channel destroyed while
	 * one is inside keeps its eventfd and memory until the last leaves (destroyed): as
	 * the kernel's ucma file stays open under a thread blocked in its read, which
	 * waits on, and never fails with EBADF. */
	int readers, destroyed;
};

/* A multicast group an identifier joined (librdmacm's cma_multicast). */
struct rl_cm_mc {
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	void *context;
	int attached; /* the identifier's QP is attached to mgid */
	struct rl_cm_mc *next;
};

/* What an identifier has done, for rdma_set_option's checks (the kernel's states). */
enum rl_cm_phase { RL_IDLE, RL_BOUND, RL_LISTENING, RL_ACTIVE };

struct rl_cm_id {
	struct rdma_cm_id id;
	uint32_t h;
	enum rl_cm_phase phase;
	/* A synchronous identifier (created without a channel) has a channel of its own,
	 * and each call that has an outcome waits for its event (ucma_complete). */
	int sync;
	struct rl_cm_channel *chan;
	struct rl_cm_id *next;
	struct rdma_conn_param offer;          /* a connection request's parameters, for rdma_accept(id, NULL) */
	struct ibv_qp_init_attr *qp_init_attr; /* rdma_create_ep's, for the QPs of rdma_get_request */
	int removed;                           /* told RDMA_CM_EVENT_DEVICE_REMOVAL */
	struct rl_cm_mc *mcs;                  /* the groups joined, newest first */
};

#define cm_id(id) ((struct rl_cm_id *)(id))
#define cm_channel(c) ((struct rl_cm_channel *)(c))

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct rl_cm_channel *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	struct rl_handle h;
	if (c->ch.fd < 0 || call(RL_OP_CM_CREATE_CHANNEL, NULL, 0, &h, sizeof(h), c->ch.fd) < 0) {
		int err = errno;
		if (c->ch.fd >= 0)
			close(c->ch.fd);
		free(c);
		errno = err;
		return NULL;
	}
	c->h = h.handle;
	pthread_mutex_init(&c->mu, NULL);
	rocelab_watch_fd(device(), c->ch.fd, 1); /* woken if the RNIC goes (removal_event) */
	return &c->ch;
}

static void free_channel(struct rl_cm_channel *c)
{
	close(c->ch.fd);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* rdma_destroy_event_channel frees the channel, or, if a thread is inside
 * rdma_get_cm_event, leaves that to it (rdma_get_cm_event): rping's event thread is
 * still waiting when its main thread destroys the channel and returns, and with the
 * kernel's rdma_cm it waits on until the process exits. */
void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct rl_cm_channel *c = cm_channel(channel);
	struct rl_handle h = {.handle = c->h};
	call(RL_OP_CM_DESTROY_CHANNEL, &h, sizeof(h), NULL, 0, -1);
	if (device())
		rocelab_watch_fd(device(), c->ch.fd, 0);
	pthread_mutex_lock(&c->mu);
	int readers = c->readers;
	c->destroyed = 1;
	pthread_mutex_unlock(&c->mu);
	if (!readers)
		free_channel(c);
}

/* take_local removes and returns the oldest local event of c, of identifier x (NULL:
 * of any). */
static struct rl_local_event *take_local(struct rl_cm_channel *c, struct rl_cm_id *x)
{
	pthread_mutex_lock(&c->mu);
	struct rl_local_event **p = &c->local;
	while (*p && x && (*p)->ev.id != &x->id)
		p = &(*p)->next;
	struct rl_local_event *e = *p;
	if (e)
		*p = e->next;
	pthread_mutex_unlock(&c->mu);
	return e;
}

/* queue_local appends e to c's local events and hands the channel its token. */
static void queue_local(struct rl_cm_channel *c, struct rl_local_event *e)
{
	static const uint64_t one = 1;
	e->next = NULL;
	pthread_mutex_lock(&c->mu);
	struct rl_local_event **p = &c->local;
	while (*p)
		p = &(*p)->next;
	*p = e;
	pthread_mutex_unlock(&c->mu);
	(void)!write(c->ch.fd, &one, sizeof(one));
}

/* link_id puts x on channel c, whose events name it by its handle. */
static void link_id(struct rl_cm_channel *c, struct rl_cm_id *x)
{
	x->chan = c;
	x->id.channel = &c->ch;
	pthread_mutex_lock(&c->mu);
	x->next = c->ids;
	c->ids = x;
	pthread_mutex_unlock(&c->mu);
}

static void unlink_id(struct rl_cm_id *x)
{
	struct rl_cm_channel *c = x->chan;
	pthread_mutex_lock(&c->mu);
	for (struct rl_cm_id **p = &c->ids; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			break;
		}
	pthread_mutex_unlock(&c->mu);
}

/* new_id makes the library's half of an identifier the service created as h. */
static struct rl_cm_id *new_id(struct rl_cm_channel *c, uint32_t h, void *context, enum rdma_port_space ps,
			       enum ibv_qp_type qpt)
{
	struct rl_cm_id *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->h = h;
	x->id.verbs = dev;
	x->id.pd = device_pd();
	x->id.context = context;
	x->id.ps = ps;
	x->id.port_num = 1;
	x->id.qp_type = qpt;
	link_id(c, x);
	return x;
}

/* create_id is librdmacm's rdma_create_id2: an identifier of port space ps and QP
 * type qpt, synchronous without a channel. */
static int create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		     enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	if (!device())
		return fail(ENODEV); /* ucma_init without a device */
	if (ps == RDMA_PS_IPOIB)
		UNSUPPORTED("rdma_create_id in the port space RDMA_PS_IPOIB");
	int sync = !channel;
	if (sync && !(channel = rdma_create_event_channel()))
		return -1;
	struct rl_cm_channel *c = cm_channel(channel);
	/* The agent's identifiers are RC or UD; an XRC one (RDMA_PS_IB) is RC there, and
	 * the device refuses its QPs or XRC domain (rdma_create_qp). */
	struct rl_cm_create_id req = {.channel = c->h, .port_space = ps,
				      .qp_type = qpt == IBV_QPT_UD ? IBV_QPT_UD : IBV_QPT_RC};
	struct rl_handle h;
	struct rl_cm_id *x = NULL;
	if (call(RL_OP_CM_CREATE_ID, &req, sizeof(req), &h, sizeof(h), -1) == 0 &&
	    !(x = new_id(c, h.handle, context, ps, qpt))) {
		call(RL_OP_CM_DESTROY_ID, &h, sizeof(h), NULL, 0, -1);
		errno = ENOMEM;
	}
	if (!x) {
		int err = errno;
		if (sync)
			rdma_destroy_event_channel(channel);
		return fail(err);
	}
	x->sync = sync;
	*id = &x->id;
	return 0;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	return create_id(channel, id, context, ps, ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC);
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct rl_cm_id *x = cm_id(id);
	struct rl_handle h = {.handle = x->h};
	int ret = call(RL_OP_CM_DESTROY_ID, &h, sizeof(h), NULL, 0, -1);
	if (id->event)
		rdma_ack_cm_event(id->event);
	unlink_id(x);
	/* its queued local events go with it (their tokens find nothing: the agent
	 * answers NOT_FOUND, which rdma_get_cm_event skips), and its groups too */
	for (struct rl_local_event *e; (e = take_local(x->chan, x));)
		free(e);
	for (struct rl_cm_mc *mc; (mc = x->mcs);) {
		x->mcs = mc->next;
		free(mc);
	}
	if (x->sync)
		rdma_destroy_event_channel(&x->chan->ch);
	free(x->qp_init_attr);
	free(x);
	return ret;
}

/* complete waits for the outcome of a synchronous identifier's call (librdmacm's
 * ucma_complete): its next event, kept in id->event until the next call; a failure
 * event is -1 with errno ECONNREFUSED (REJECTED) or the event's status. */
static int complete(struct rdma_cm_id *id)
{
	if (!cm_id(id)->sync)
		return 0;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	if (rdma_get_cm_event(id->channel, &id->event) < 0)
		return -1;
	if (id->event->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
		return fail(ENODEV); /* the RNIC went while the call waited */
	int status = id->event->status;
	if (!status)
		return 0;
	if (id->event->event == RDMA_CM_EVENT_REJECTED)
		return fail(ECONNREFUSED);
	return fail(status < 0 ? -status : status);
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct rl_cm_id *x = cm_id(id);
	if (x->sync && !channel)
		return fail(EINVAL);
	int sync = !channel;
	if (sync && !(channel = rdma_create_event_channel()))
		return -1;
	struct rl_cm_channel *from = x->chan, *to = cm_channel(channel);
	struct rl_cm_migrate_id req = {.id = x->h, .channel = to->h};
	if (call(RL_OP_CM_MIGRATE_ID, &req, sizeof(req), NULL, 0, -1) < 0) {
		int err = errno;
		if (sync)
			rdma_destroy_event_channel(channel);
		return fail(err);
	}
	unlink_id(x);
	link_id(to, x);
	/* its local events move with it, as the kernel's ucma_migrate_id moves its queued
	 * events; the old channel's tokens for them find nothing and are skipped */
	for (struct rl_local_event *e; (e = take_local(from, x));)
		queue_local(to, e);
	if (x->sync) {
		if (id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		rdma_destroy_event_channel(&from->ch);
	}
	x->sync = sync;
	return 0;
}

/* ---- addresses ---- */

static int to_wire_addr(const struct sockaddr *sa, struct rl_cm_addr *w)
{
	memset(w, 0, sizeof(*w));
	if (!sa || sa->sa_family == AF_UNSPEC) /* not bound */
		return 0;
	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		if (in->sin_addr.s_addr != htonl(INADDR_ANY)) {
			w->addr[10] = w->addr[11] = 0xff;
			memcpy(&w->addr[12], &in->sin_addr, 4);
		}
		w->port = ntohs(in->sin_port);
		return 0;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		memcpy(w->addr, &in6->sin6_addr, 16);
		w->port = ntohs(in6->sin6_port);
		return 0;
	}
	}
	return fail(EAFNOSUPPORT);
}

static int is_v4_mapped(const uint8_t a[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(a, prefix, 12) == 0;
}

/* from_wire_addr writes w as a sockaddr of family (w's own when w is set). */
static void from_wire_addr(const struct rl_cm_addr *w, int family, struct sockaddr_storage *ss)
{
	static const uint8_t zero[16];
	if (memcmp(w->addr, zero, 16) != 0)
		family = is_v4_mapped(w->addr) ? AF_INET : AF_INET6;
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, w->addr, 16);
		in6->sin6_port = htons(w->port);
		return;
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	in->sin_family = AF_INET;
	memcpy(&in->sin_addr, &w->addr[12], 4);
	in->sin_port = htons(w->port);
}

/* gid_of is the GID of a sockaddr as RoCEv2 names it (IPv4 mapped into IPv6). */
static void gid_of(const struct sockaddr_storage *ss, union ibv_gid *gid)
{
	struct rl_cm_addr w;
	if (to_wire_addr((const struct sockaddr *)ss, &w) == 0)
		memcpy(gid->raw, w.addr, 16);
}

static size_t addr_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	}
	return 0;
}

static void set_route(struct rdma_cm_id *id, const struct rl_cm_addr *local, const struct rl_cm_addr *remote)
{
	int family = id->route.addr.src_addr.sa_family ? id->route.addr.src_addr.sa_family
						       : id->route.addr.dst_addr.sa_family;
	from_wire_addr(local, family ? family : AF_INET, &id->route.addr.src_storage);
	from_wire_addr(remote, id->route.addr.src_addr.sa_family, &id->route.addr.dst_storage);
	gid_of(&id->route.addr.src_storage, &id->route.addr.addr.ibaddr.sgid);
	gid_of(&id->route.addr.dst_storage, &id->route.addr.addr.ibaddr.dgid);
	id->route.addr.addr.ibaddr.pkey = htons(0xffff);
}

/* rdma_bind_addr binds in the agent, which gives port 0 an ephemeral port of the
 * host's ip_local_port_range and answers EADDRINUSE/EADDRNOTAVAIL as the kernel's
 * cma_check_port; the address and port the identifier got are id's source address
 * (librdmacm queries them, ucma_query_route). */
int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	size_t n = addr ? addr_len(addr) : 0;
	if (!n)
		return fail(EINVAL); /* ucma_addrlen: not AF_INET, AF_INET6 (nor AF_IB, which is not offered) */
	struct rl_cm_bind req = {.id = cm_id(id)->h};
	struct rl_cm_addr got;
	if (to_wire_addr(addr, &req.addr) < 0 || call(RL_OP_CM_BIND, &req, sizeof(req), &got, sizeof(got), -1) < 0)
		return -1;
	from_wire_addr(&got, addr->sa_family, &id->route.addr.src_storage);
	gid_of(&id->route.addr.src_storage, &id->route.addr.addr.ibaddr.sgid);
	cm_id(id)->phase = RL_BOUND;
	return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	/* the kernel's rdma_listen binds an unbound identifier to AF_INET's wildcard
	 * address and an ephemeral port first */
	struct sockaddr_in any = {.sin_family = AF_INET};
	if (cm_id(id)->phase == RL_IDLE && rdma_bind_addr(id, (struct sockaddr *)&any) < 0)
		return -1;
	struct rl_cm_listen req = {.id = cm_id(id)->h, .backlog = backlog > 0 ? (uint32_t)backlog : 0};
	if (to_wire_addr(&id->route.addr.src_addr, &req.addr) < 0 || call(RL_OP_CM_LISTEN, &req, sizeof(req), NULL, 0, -1) < 0)
		return -1;
	cm_id(id)->phase = RL_LISTENING;
	return 0;
}

/* is_multicast: an IPv4 224.0.0.0/4 or IPv6 ff00::/8 address (mckey's groups). */
static int is_multicast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* post_local queues a local event of type for x with status 0 and completes a
 * synchronous identifier's call on it. fill, if set, fills the event's parameters. */
static int post_local(struct rl_cm_id *x, enum rdma_cm_event_type type, void (*fill)(struct rdma_cm_event *, void *),
		      void *arg)
{
	struct rl_local_event *e = calloc(1, sizeof(*e));
	if (!e)
		return fail(ENOMEM);
	e->ev.id = &x->id;
	e->ev.event = type;
	if (fill)
		fill(&e->ev, arg);
	queue_local(x->chan, e);
	return complete(&x->id);
}

/* local_gid is the device's first RoCEv2 GID of family (the source of a multicast
 * destination resolved from a wildcard address: the kernel routes to the one device). */
static int local_gid(int family, union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry g;
	if (ibv_query_port(dev, 1, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++)
		if (ibv_query_gid_ex(dev, 1, i, &g, 0) == 0 && g.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    is_v4_mapped(g.gid.raw) == (family == AF_INET)) {
			*gid = g.gid;
			return 0;
		}
	return fail(EADDRNOTAVAIL);
}

/* resolve_mcast is rdma_resolve_addr of a multicast group, the first step of a join:
 * the identifier binds (to src_addr, or the wildcard address and then the device's
 * address of the family) and its destination is the group; ADDR_RESOLVED follows at
 * once, without ARP, as from the kernel's cma_resolve_addr. */
static int resolve_mcast(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr)
{
	struct rl_cm_id *x = cm_id(id);
	struct sockaddr_storage any = {.ss_family = dst_addr->sa_family};
	if (x->phase == RL_IDLE && rdma_bind_addr(id, src_addr ? src_addr : (struct sockaddr *)&any) < 0)
		return -1;
	if (id->route.addr.src_addr.sa_family != dst_addr->sa_family)
		return fail(EINVAL);
	static const uint8_t zero[16];
	if (memcmp(id->route.addr.addr.ibaddr.sgid.raw, zero, 16) == 0) {
		union ibv_gid g;
		if (local_gid(dst_addr->sa_family, &g) < 0)
			return -1;
		struct rl_cm_addr w = {.port = ntohs(rdma_get_src_port(id))};
		memcpy(w.addr, g.raw, 16);
		from_wire_addr(&w, dst_addr->sa_family, &id->route.addr.src_storage);
		id->route.addr.addr.ibaddr.sgid = g;
	}
	memcpy(&id->route.addr.dst_storage, dst_addr, addr_len(dst_addr));
	gid_of(&id->route.addr.dst_storage, &id->route.addr.addr.ibaddr.dgid);
	id->route.addr.addr.ibaddr.pkey = htons(0xffff);
	x->phase = RL_ACTIVE;
	return post_local(x, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, NULL);
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr, int timeout_ms)
{
	if (!dst_addr || !addr_len(dst_addr) || (src_addr && !addr_len(src_addr)))
		return fail(EINVAL); /* ucma_addrlen */
	if (is_multicast(dst_addr))
		return resolve_mcast(id, src_addr, dst_addr);
	/* the kernel's resolve_prepare_src: an unbound identifier binds to src_addr, a
	 * bound one keeps its address, whose family must be dst_addr's */
	if (cm_id(id)->phase == RL_IDLE && src_addr && rdma_bind_addr(id, src_addr) < 0)
		return -1;
	if (cm_id(id)->phase == RL_BOUND && id->route.addr.src_addr.sa_family != dst_addr->sa_family)
		return fail(EINVAL);
	struct rl_cm_resolve_addr req = {.id = cm_id(id)->h, .timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0};
	if (to_wire_addr(&id->route.addr.src_addr, &req.src) < 0 || to_wire_addr(dst_addr, &req.dst) < 0)
		return -1;
	memcpy(&id->route.addr.dst_storage, dst_addr, addr_len(dst_addr));
	if (call(RL_OP_CM_RESOLVE_ADDR, &req, sizeof(req), NULL, 0, -1) < 0)
		return -1;
	cm_id(id)->phase = RL_ACTIVE;
	return complete(id);
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct rl_handle h = {.handle = cm_id(id)->h};
	if (call(RL_OP_CM_RESOLVE_ROUTE, &h, sizeof(h), NULL, 0, -1) < 0)
		return -1;
	return complete(id);
}

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id->route.addr.src_addr.sa_family == AF_INET6 ? id->route.addr.src_sin6.sin6_port
							     : id->route.addr.src_sin.sin_port;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id->route.addr.dst_addr.sa_family == AF_INET6 ? id->route.addr.dst_sin6.sin6_port
							     : id->route.addr.dst_sin.sin_port;
}

/* ---- QPs ---- */

/* init_qp moves a new QP as librdmacm does: an RC QP to INIT, with the access the
 * CM agent gives the QPs it moves itself (rnic/cm.go initQP): the peer's RDMA READ
 * and WRITE (rping) need it, since the agent sets no access flags at RTR. A UD QP
 * goes on to RTS at once with rdma_cm's UDP Q_Key (ucma_init_ud_qp): SIDR only tells
 * the peer its QPN. */
static int init_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT};
	int mask, err = rdma_init_qp_attr(id, &a, &mask) ? errno : 0;
	if (!err)
		err = ibv_modify_qp(qp, &a, mask);
	if (err || qp->qp_type != IBV_QPT_UD)
		return err;
	a.qp_state = IBV_QPS_RTR;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		return err;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* destroy_cqs destroys the CQs and completion channels the library made for id
 * (librdmacm's ucma_destroy_cqs): id->send_cq and id->recv_cq are only ever those. */
static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq && id->send_cq != id->recv_cq)
		ibv_destroy_cq(id->send_cq);
	id->recv_cq = id->send_cq = NULL;
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	id->recv_cq_channel = id->send_cq_channel = NULL;
}

/* create_cq makes one CQ of n entries with a completion channel of its own, as
 * ucma_create_cqs: rdma_get_send_comp/rdma_get_recv_comp (rdma_verbs.h) arm it and
 * wait on the channel. */
static int create_cq(struct rdma_cm_id *id, uint32_t n, struct ibv_cq **cq, struct ibv_comp_channel **ch)
{
	if (!n)
		return 0;
	if (!(*ch = ibv_create_comp_channel(id->verbs)) || !(*cq = ibv_create_cq(id->verbs, n, id, *ch, 0))) {
		int err = errno;
		destroy_cqs(id);
		return fail(err);
	}
	return 0;
}

/* rdma_create_qp_ex as librdmacm's: without a PD the identifier's (the library's
 * PD of the device, or rdma_create_ep's); each CQ not given is made with its own
 * completion channel, sized by the QP's capacity, and destroyed with the QP; an SRQ of
 * rdma_create_srq is used; an XRC_RECV identifier's QP gets the device's XRC domain. */
int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	if (id->qp)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (attr->pd->context != id->verbs)
		return fail(EINVAL);
	if (!attr->pd)
		return fail(EINVAL);
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return fail(EINVAL);
	if (id->qp_type == IBV_QPT_XRC_RECV && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		if (!(attr->xrcd = device_xrcd()))
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (create_cq(id, attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr, &id->recv_cq, &id->recv_cq_channel) < 0 ||
	    create_cq(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr, &id->send_cq, &id->send_cq_channel) < 0)
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
	int err = qp ? init_qp(id, qp) : errno;
	if (err) {
		if (qp)
			ibv_destroy_qp(qp);
		destroy_cqs(id);
		return fail(err);
	}
	if (qp->pd) /* an XRC_RECV QP has none: it lives in the XRC domain */
		id->pd = qp->pd;
	id->qp = qp;
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd ? pd : id->pd;
	int ret = rdma_create_qp_ex(id, &a);
	memcpy(qp_init_attr, &a, sizeof(*qp_init_attr)); /* the CQs made, the capacity granted */
	return ret;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

/* rdma_create_srq_ex as librdmacm's: the identifier's PD without one; an XRC SRQ
 * (XRC_RECV identifiers) gets the device's XRC domain and a CQ of the library. */
int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		if ((!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) && !(attr->xrcd = device_xrcd()))
			return -1;
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (create_cq(id, attr->attr.max_wr, &id->recv_cq, &id->recv_cq_channel) < 0)
				return -1;
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	struct ibv_srq *srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		int err = errno;
		destroy_cqs(id);
		return fail(err);
	}
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	memcpy(&a, attr, sizeof(*attr));
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	a.pd = pd;
	int ret = rdma_create_srq_ex(id, &a);
	memcpy(attr, &a, sizeof(*attr));
	return ret;
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);
}

/* rdma_init_qp_attr asks the CM agent, which holds what the connection negotiated
 * (rnic/cm.go InitQPAttr): INIT before anything, RTR and RTS once the request (passive
 * side) or the REP (active side) is in. */
int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct rl_cm_init_qp_attr req = {.id = cm_id(id)->h, .state = qp_attr->qp_state};
	struct rl_cm_qp_attr resp;
	if (call(RL_OP_CM_INIT_QP_ATTR, &req, sizeof(req), &resp, sizeof(resp), -1) < 0)
		return -1;
	rocelab_qp_attr(id->verbs, &resp.attr, qp_attr);
	*qp_attr_mask = resp.mask;
	return 0;
}

/* ---- connections ---- */

/* conn_param encodes p (dflt when NULL), with librdmacm's rule for the RDMA READ and
 * atomic depths: RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH mean the device's maximum,
 * more than the maximum is EINVAL. */
static int conn_param(struct ibv_context *verbs, const struct rdma_conn_param *p, const struct rdma_conn_param *dflt,
		      size_t max_private, struct rl_cm_conn_param *w)
{
	memset(w, 0, sizeof(*w));
	if (!p)
		p = dflt;
	struct ibv_device_attr a;
	int err = ibv_query_device(verbs, &a);
	if (err)
		return fail(err);
	unsigned max_resp = a.max_qp_rd_atom, max_init = a.max_qp_init_rd_atom;
	if (p->private_data_len > max_private || (p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > max_resp) ||
	    (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > max_init))
		return fail(EINVAL);
	w->responder_resources = p->responder_resources < max_resp ? p->responder_resources : max_resp;
	w->initiator_depth = p->initiator_depth < max_init ? p->initiator_depth : max_init;
	w->retry_count = p->retry_count;
	w->rnr_retry_count = p->rnr_retry_count;
	w->private_data_len = p->private_data_len;
	if (p->private_data_len)
		memcpy(w->private_data, p->private_data, p->private_data_len);
	return 0;
}

/* connecting is rdma_connect and rdma_accept: of id->qp, which the agent moves, or,
 * for a QP the application created itself and moves with rdma_init_qp_attr, of the
 * QP p->qp_num names (ucma_valid_param: EINVAL without p). */
static int connecting(struct rdma_cm_id *id, uint16_t op, const struct rdma_conn_param *p,
		      const struct rdma_conn_param *dflt, size_t max_private)
{
	struct rl_cm_connect req = {.id = cm_id(id)->h};
	if (id->qp)
		req.qp = rocelab_qp_handle(id->qp);
	else if (p)
		req.qpn = p->qp_num;
	else
		return fail(EINVAL);
	if (conn_param(id->verbs, p, dflt, max_private, &req.param) < 0)
		return -1;
	return call(op, &req, sizeof(req), NULL, 0, -1);
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	/* librdmacm's defaults without parameters */
	static const struct rdma_conn_param dflt = {
		.responder_resources = RDMA_MAX_RESP_RES, .initiator_depth = RDMA_MAX_INIT_DEPTH,
		.retry_count = 7, .rnr_retry_count = 7};
	/* a REQ's 92 bytes of private data or a SIDR_REQ's 216, less the CMA header */
	if (connecting(id, RL_OP_CM_CONNECT, conn_param, &dflt, id->qp_type == IBV_QPT_UD ? 180 : 56) < 0)
		return -1;
	return complete(id);
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	/* a REP's private data, or a SIDR_REP's */
	int ud = id->qp_type == IBV_QPT_UD;
	if (connecting(id, RL_OP_CM_ACCEPT, conn_param, &cm_id(id)->offer, ud ? 136 : 196) < 0)
		return -1;
	if (!ud)
		return complete(id); /* ESTABLISHED, with the RTU */
	if (cm_id(id)->sync && id->event) { /* a SIDR_REP is all: no event follows */
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	return 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	struct rl_cm_reject req = {.id = cm_id(id)->h, .private_data_len = private_data_len};
	if (private_data_len > sizeof(req.private_data))
		return fail(EINVAL);
	if (private_data_len)
		memcpy(req.private_data, private_data, private_data_len);
	return call(RL_OP_CM_REJECT, &req, sizeof(req), NULL, 0, -1);
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	struct rl_handle h = {.handle = cm_id(id)->h};
	if (call(RL_OP_CM_DISCONNECT, &h, sizeof(h), NULL, 0, -1) < 0)
		return -1;
	return complete(id);
}

/* rdma_establish sends the RTU after CONNECT_RESPONSE, for an application that moves
 * its QP itself; with id->qp the library does that, so it is EINVAL, as librdmacm. */
int rdma_establish(struct rdma_cm_id *id)
{
	if (id->qp)
		return fail(EINVAL);
	struct rl_handle h = {.handle = cm_id(id)->h};
	return call(RL_OP_CM_ESTABLISH, &h, sizeof(h), NULL, 0, -1);
}

/* rdma_set_option at level RDMA_OPTION_ID as the kernel's ucma takes it: the type of
 * service and the ACK timeout (one byte each) reach the agent, which puts them in the
 * path and the QP, and so does REUSEADDR (an int), which lets identifiers that both
 * set it share a port until one listens (the agent checks the state as the kernel's
 * rdma_set_reuseaddr). AFONLY (an int) is checked against the identifier's state as
 * the kernel does and changes nothing: the agent's wildcard listeners take both
 * families. Anything else is ENOSYS, as the kernel answers unknown options. */
int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	struct rl_cm_id *x = cm_id(id);
	if (level != RDMA_OPTION_ID) {
		UNSUPPORTED("rdma_set_option at a level other than RDMA_OPTION_ID");
		return fail(ENOSYS);
	}
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
	case RDMA_OPTION_ID_ACK_TIMEOUT: {
		if (optlen != sizeof(uint8_t) || !optval)
			return fail(EINVAL);
		struct rl_cm_set_option req = {.id = x->h, .option = optname, .value = *(uint8_t *)optval};
		return call(RL_OP_CM_SET_OPTION, &req, sizeof(req), NULL, 0, -1);
	}
	case RDMA_OPTION_ID_REUSEADDR: {
		if (optlen != sizeof(int) || !optval)
			return fail(EINVAL);
		struct rl_cm_set_option req = {.id = x->h, .option = optname, .value = !!*(int *)optval};
		return call(RL_OP_CM_SET_OPTION, &req, sizeof(req), NULL, 0, -1);
	}
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int) || !optval)
			return fail(EINVAL);
		if (x->phase != RL_IDLE && x->phase != RL_BOUND)
			return fail(EINVAL); /* rdma_set_afonly */
		return 0;
	}
	return fail(ENOSYS);
}

/* ---- ECE ---- */

/* rdma_set_local_ece and rdma_get_remote_ece as librdmacm's, with what rxe peers
 * exchange: the CM agent carries no ECE in its REQ and REP (the soft-RNIC, as rxe, has
 * none: ibv_query_ece is EOPNOTSUPP), so the local one is checked, with nothing to
 * carry it, and the remote one is vendor 0, options 0. */
int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return fail(EINVAL);
	return 0;
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return fail(EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}

/* ---- events ---- */

static struct rl_cm_id *find_id(struct rl_cm_channel *c, uint32_t h)
{
	struct rl_cm_id *x;
	pthread_mutex_lock(&c->mu);
	for (x = c->ids; x && x->h != h; x = x->next)
		;
	pthread_mutex_unlock(&c->mu);
	return x;
}

/* sgid_index is the index of gid's RoCEv2 entry in the port's GID table (the AH of
 * a UD event names its source GID by index, as the kernel's). */
static uint8_t sgid_index(struct ibv_context *c, const union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry g;
	if (ibv_query_port(c, 1, &pa))
		return 0;
	for (int i = 0; i < pa.gid_tbl_len; i++)
		if (ibv_query_gid_ex(c, 1, i, &g, 0) == 0 && g.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    memcmp(g.gid.raw, gid->raw, 16) == 0)
			return i;
	return 0;
}

/* ud_event fills the UD parameters of an event of an RDMA_PS_UDP identifier
 * (ucma_copy_ud_event): the private data, and for ESTABLISHED the SIDR_REP's QPN and
 * Q_Key and the address handle of the route, as the kernel builds it from the path:
 * global, the resolved GIDs, the flow label of the ports, hop limit 64. */
static void ud_event(struct rdma_cm_id *id, const struct rl_cm_event *w, struct rdma_cm_event *e,
		     const void *private_data, uint8_t private_data_len)
{
	struct rdma_ud_param *u = &e->param.ud;
	memset(u, 0, sizeof(*u));
	u->private_data = private_data;
	u->private_data_len = private_data_len;
	if (w->type != RDMA_CM_EVENT_ESTABLISHED)
		return;
	u->qp_num = w->qpn;
	u->qkey = w->qkey;
	rl_route_ah(id, w->flow_label, &u->ah_attr);
}

void rl_route_ah(struct rdma_cm_id *id, uint32_t flow_label, struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->is_global = 1;
	a->port_num = id->port_num;
	a->grh.dgid = id->route.addr.addr.ibaddr.dgid;
	a->grh.sgid_index = sgid_index(id->verbs, &id->route.addr.addr.ibaddr.sgid);
	a->grh.flow_label = flow_label;
	a->grh.hop_limit = 64;
}

/* device_gone tells whether the RNIC went away (the lab process died). */
static int device_gone(void)
{
	struct ibv_context *c = device();
	return c && rocelab_device_gone(c);
}

/* removal_event is rdma_get_cm_event once the RNIC has gone (the lab process died): as
 * the kernel's rdma_cm tells each identifier of a removed device, one
 * RDMA_CM_EVENT_DEVICE_REMOVAL per identifier of the channel, then -1 with ENODEV. It
 * leaves a token for the next reader, so that no waiter blocks. */
static int removal_event(struct rl_cm_channel *c, struct rdma_cm_event **event)
{
	static const uint64_t one = 1;
	pthread_mutex_lock(&c->mu);
	struct rl_cm_id *x = c->ids;
	while (x && x->removed)
		x = x->next;
	if (x)
		x->removed = 1;
	pthread_mutex_unlock(&c->mu);
	(void)!write(c->ch.fd, &one, sizeof(one));
	if (!x)
		return fail(ENODEV);
	struct rdma_cm_event *e = calloc(1, sizeof(*e) + 196); /* rdma_ack_cm_event frees it */
	if (!e)
		return fail(ENOMEM);
	e->id = &x->id;
	e->event = RDMA_CM_EVENT_DEVICE_REMOVAL;
	*event = e;
	return 0;
}

static int get_cm_event(struct rl_cm_channel *c, struct rdma_cm_event **event);

/* rdma_get_cm_event waits for the channel's next event. A channel destroyed meanwhile
 * (rdma_destroy_event_channel) stays open under it: its stale tokens are skipped as
 * any are, and it waits on, as the kernel's does, for an event that never comes. */
int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct rl_cm_channel *c = cm_channel(channel);
	pthread_mutex_lock(&c->mu);
	c->readers++;
	pthread_mutex_unlock(&c->mu);
	int ret = get_cm_event(c, event), err = errno;
	pthread_mutex_lock(&c->mu);
	int last = --c->readers == 0 && c->destroyed;
	pthread_mutex_unlock(&c->mu);
	if (last)
		free_channel(c);
	errno = err;
	return ret;
}

static int get_cm_event(struct rl_cm_channel *c, struct rdma_cm_event **event)
{
	struct rl_cm_event resp, *w = &resp;
	struct rl_cm_id *x;
	for (;;) {
		uint64_t token;
		ssize_t n;
		while ((n = read(c->ch.fd, &token, sizeof(token))) < 0 && errno == EINTR)
			;
		if (n < 0)
			return -1; /* EAGAIN: no event and a non-blocking fd */
		if (device_gone())
			return removal_event(c, event);
		struct rl_local_event *le = take_local(c, NULL);
		if (le) {
			*event = &le->ev;
			return 0;
		}
		struct rl_handle h = {.handle = c->h};
		if (call(RL_OP_CM_GET_EVENT, &h, sizeof(h), &resp, sizeof(resp), -1) < 0) {
			if (device_gone())
				return removal_event(c, event);
			if (errno == EINVAL)
				continue; /* a token whose event went with its identifier (rdma_migrate_id,
					   * rdma_destroy_id) */
			return -1;
		}
		x = find_id(c, w->id);
		if (x || w->type == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		/* an event of an identifier destroyed while it was queued: gone with it, as
		 * the kernel's rdma_cm drops them */
	}
	struct rl_cm_event_buf {
		struct rdma_cm_event ev;
		uint8_t private_data[196];
	} *e = calloc(1, sizeof(*e));
	if (!e)
		return fail(ENOMEM);
	if (w->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct rl_cm_id *l = find_id(c, w->listener);
		x = new_id(c, w->id, l ? l->id.context : NULL, l ? l->id.ps : RDMA_PS_TCP,
			   l ? l->id.qp_type : IBV_QPT_RC);
		if (!x) {
			free(e);
			return fail(ENOMEM);
		}
		e->ev.listen_id = l ? &l->id : NULL;
		x->phase = RL_ACTIVE;
		x->id.route.addr.src_addr.sa_family = l ? l->id.route.addr.src_addr.sa_family : 0;
		/* a synchronous listener's requests are synchronous identifiers
		 * (ucma_process_conn_req) */
		if (l && l->sync && rdma_migrate_id(&x->id, NULL) < 0) {
			int err = errno;
			rdma_destroy_id(&x->id);
			free(e);
			return fail(err);
		}
	}
	set_route(&x->id, &w->local, &w->remote);
	e->ev.id = &x->id;
	e->ev.event = w->type;
	e->ev.status = w->status;
	struct rdma_conn_param *p = &e->ev.param.conn;
	size_t pdlen = w->param.private_data_len < sizeof(e->private_data) ? w->param.private_data_len
									      : sizeof(e->private_data);
	memcpy(e->private_data, w->param.private_data, pdlen);
	p->private_data = pdlen ? e->private_data : NULL;
	p->private_data_len = pdlen;
	p->responder_resources = w->param.responder_resources;
	p->initiator_depth = w->param.initiator_depth;
	p->retry_count = w->param.retry_count;
	p->rnr_retry_count = w->param.rnr_retry_count;
	p->qp_num = w->qpn;
	if (w->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		x->offer = *p;
		x->offer.private_data = NULL;
		x->offer.private_data_len = 0;
	}
	if (x->id.qp_type == IBV_QPT_UD) /* param is a union: ud replaces conn */
		ud_event(&x->id, w, &e->ev, pdlen ? e->private_data : NULL, pdlen);
	*event = &e->ev;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	free(event);
	return 0;
}

/* rdma_get_request is librdmacm's: a synchronous listener's next connection request,
 * with the QP of rdma_create_ep's attributes made on the new identifier. */
int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rl_cm_id *l = cm_id(listen);
	if (!l->sync)
		return fail(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	struct rdma_cm_event *event;
	if (rdma_get_cm_event(listen->channel, &event) < 0)
		return -1;
	int err = 0;
	if (event->event == RDMA_CM_EVENT_REJECTED)
		err = ECONNREFUSED;
	else if (event->status)
		err = event->status < 0 ? -event->status : event->status;
	else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		err = EINVAL;
	else if (l->qp_init_attr) {
		struct ibv_qp_init_attr a = *l->qp_init_attr;
		if (rdma_create_qp(event->id, listen->pd, &a) < 0)
			err = errno;
	}
	if (err) {
		listen->event = event;
		return fail(err);
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
}

/* rdma_create_ep is librdmacm's: a synchronous identifier of res's port space and QP
 * type; passive (RAI_PASSIVE), bound to res's source address, keeping pd and
 * qp_init_attr for rdma_get_request; active, with its address and route resolved
 * (2 s each) and, given qp_init_attr, its QP. */
int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	if (!res)
		return fail(EINVAL);
	if (res->ai_route_len || res->ai_connect_len) { /* what ibacm's resolution adds */
		UNSUPPORTED("rdma_create_ep with ai_route or ai_connect (path records from ibacm)");
		return fail(EOPNOTSUPP);
	}
	struct rdma_cm_id *cid;
	if (create_id(NULL, &cid, NULL, res->ai_port_space, res->ai_qp_type) < 0)
		return -1;
	struct rl_cm_id *x = cm_id(cid);
	int ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cid, res->ai_src_addr);
		if (!ret && pd)
			cid->pd = pd;
		if (!ret && qp_init_attr) {
			if (!(x->qp_init_attr = malloc(sizeof(*qp_init_attr))))
				ret = fail(ENOMEM);
			else {
				*x->qp_init_attr = *qp_init_attr;
				x->qp_init_attr->qp_type = res->ai_qp_type;
			}
		}
	} else {
		ret = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!ret)
			ret = rdma_resolve_route(cid, 2000);
		if (!ret && qp_init_attr) {
			qp_init_attr->qp_type = res->ai_qp_type;
			ret = rdma_create_qp(cid, pd, qp_init_attr);
		}
	}
	if (ret) {
		int err = errno;
		rdma_destroy_ep(cid);
		return fail(err);
	}
	*id = cid;
	return 0;
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id); /* frees the kept qp_init_attr */
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

/* ---- rdma_getaddrinfo: librdmacm's (addrinfo.c), over the system resolver ---- */

/* to_ai is ucma_convert_to_ai: the resolver's hints for rdma_getaddrinfo's. */
static void to_ai(struct addrinfo *ai, const struct rdma_addrinfo *rai)
{
	memset(ai, 0, sizeof(*ai));
	if (rai->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (rai->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	if (rai->ai_family != AF_IB)
		ai->ai_family = rai->ai_family;
	switch (rai->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (rai->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai->ai_socktype == SOCK_STREAM)
			ai->ai_protocol = IPPROTO_TCP;
		else if (ai->ai_socktype == SOCK_DGRAM)
			ai->ai_protocol = IPPROTO_UDP;
		break;
	}
	if (rai->ai_flags & RAI_PASSIVE) {
		ai->ai_addrlen = rai->ai_src_len;
		ai->ai_addr = rai->ai_src_addr;
	} else {
		ai->ai_addrlen = rai->ai_dst_len;
		ai->ai_addr = rai->ai_dst_addr;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src, socklen_t src_len)
{
	if (!(*dst = malloc(src_len)))
		return fail(ENOMEM);
	memcpy(*dst, src, src_len);
	*dst_len = src_len;
	return 0;
}

/* to_ib is ucma_convert_in6: RAI_FAMILY with AF_IB names the IPv6 address (a GID) as
 * a sockaddr_ib, its service ID the port space's and port. */
static int to_ib(int ps, struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src)
{
	struct sockaddr_ib *ib = calloc(1, sizeof(*ib));
	if (!ib)
		return fail(ENOMEM);
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)src;
	ib->sib_family = AF_IB;
	ib->sib_pkey = htons(0xFFFF);
	ib->sib_flowinfo = in6->sin6_flowinfo;
	memcpy(&ib->sib_addr, &in6->sin6_addr, 16);
	uint16_t port = ntohs(in6->sin6_port);
	ib->sib_sid = htobe64(((uint64_t)ps << 16) + port);
	if (ps)
		ib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
	if (port)
		ib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
	ib->sib_scope_id = in6->sin6_scope_id;
	*dst = (struct sockaddr *)ib;
	*dst_len = sizeof(*ib);
	return 0;
}

/* to_rai is ucma_convert_to_rai: the resolver's first answer as rdma_getaddrinfo's,
 * the QP type and port space the hints' or the socket type's and protocol's. */
static int to_rai(struct rdma_addrinfo *rai, const struct rdma_addrinfo *hints, const struct addrinfo *ai)
{
	if (hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else if (ai->ai_socktype == SOCK_STREAM)
		rai->ai_qp_type = IBV_QPT_RC;
	else if (ai->ai_socktype == SOCK_DGRAM)
		rai->ai_qp_type = IBV_QPT_UD;
	if (hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else if (ai->ai_protocol == IPPROTO_TCP)
		rai->ai_port_space = RDMA_PS_TCP;
	else if (ai->ai_protocol == IPPROTO_UDP)
		rai->ai_port_space = RDMA_PS_UDP;
	int passive = ai->ai_flags & AI_PASSIVE;
	if (passive)
		rai->ai_flags = RAI_PASSIVE;
	char **canon = passive ? &rai->ai_src_canonname : &rai->ai_dst_canonname;
	if (ai->ai_canonname && !(*canon = strdup(ai->ai_canonname)))
		return fail(ENOMEM);
	struct sockaddr **addr = passive ? &rai->ai_src_addr : &rai->ai_dst_addr;
	socklen_t *len = passive ? &rai->ai_src_len : &rai->ai_dst_len;
	if ((hints->ai_flags & RAI_FAMILY) && hints->ai_family == AF_IB && (hints->ai_flags & RAI_NUMERICHOST)) {
		rai->ai_family = AF_IB;
		return to_ib(rai->ai_port_space, addr, len, ai->ai_addr);
	}
	rai->ai_family = ai->ai_family;
	return copy_addr(addr, len, ai->ai_addr, ai->ai_addrlen);
}

/* rdma_getaddrinfo is librdmacm's: -1 with errno for its own refusals, the
 * resolver's EAI_ code for the resolver's. Without node and service the hints'
 * addresses are the answer. No ibacm: no route (ai_route) or connect data. */
int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	if (!service && !node && !hints)
		return fail(EINVAL);
	if (!device())
		return fail(ENODEV); /* ucma_init */
	struct rdma_addrinfo *rai = calloc(1, sizeof(*rai));
	if (!rai)
		return fail(ENOMEM);
	if (!hints)
		hints = &nohints;
	int ret = 0;
	if (node || service) {
		struct addrinfo h, *ai;
		if (hints != &nohints)
			to_ai(&h, hints);
		ret = getaddrinfo(node, service, hints != &nohints ? &h : NULL, &ai);
		if (!ret) {
			ret = to_rai(rai, hints, ai);
			freeaddrinfo(ai);
		}
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		return ret;
	}
	*res = rai;
	return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* ---- multicast ---- */

/* join_event fills MULTICAST_JOIN as the kernel's cma_make_mc_event does for RoCE and
 * librdmacm's ucma_process_join passes it on: the group's address handle (global, the
 * MGID, the identifier's source GID, hop limit 64), QPN 0xFFFFFF, rdma_cm's UDP Q_Key,
 * and the join's context as private_data. */
static void join_event(struct rdma_cm_event *e, void *arg)
{
	struct rl_cm_mc *mc = arg;
	struct rdma_cm_id *id = e->id;
	struct rdma_ud_param *u = &e->param.ud;
	u->private_data = mc->context;
	u->qp_num = 0xFFFFFF;
	u->qkey = RDMA_UDP_QKEY;
	rl_route_ah(id, 0, &u->ah_attr);
	u->ah_attr.grh.dgid = mc->mgid;
}

/* rdma_join_multicast_ex joins the group of attr's address (librdmacm's checks, then
 * the kernel's: the identifier must have a source, bound or resolved). The MGID is
 * the address as a RoCEv2 GID (IPv4 mapped), as cma_iboe_set_mgid makes it; a full
 * member's QP is attached to it (ucma_process_join), a send-only member's is not. */
int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	struct rl_cm_id *x = cm_id(id);
	if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) || attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return fail(EINVAL);
	size_t n = attr->addr ? addr_len(attr->addr) : 0;
	if (!n || !is_multicast(attr->addr))
		return fail(EINVAL);
	if (x->phase == RL_IDLE || x->phase == RL_LISTENING)
		return fail(EINVAL); /* rdma_join_multicast: neither ADDR_BOUND nor ADDR_RESOLVED */
	if (id->route.addr.src_addr.sa_family != attr->addr->sa_family)
		return fail(EINVAL);
	struct rl_cm_mc *mc = calloc(1, sizeof(*mc));
	if (!mc)
		return fail(ENOMEM);
	memcpy(&mc->addr, attr->addr, n);
	gid_of(&mc->addr, &mc->mgid);
	mc->context = context;
	if (id->qp && attr->join_flags == RDMA_MC_JOIN_FLAG_FULLMEMBER) {
		int err = ibv_attach_mcast(id->qp, &mc->mgid, 0);
		if (err) {
			free(mc);
			return fail(err);
		}
		mc->attached = 1;
	}
	mc->next = x->mcs;
	x->mcs = mc;
	return post_local(x, RDMA_CM_EVENT_MULTICAST_JOIN, join_event, mc);
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	struct rdma_cm_join_mc_attr_ex attr = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					       .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER,
					       .addr = addr};
	return rdma_join_multicast_ex(id, &attr, context);
}

/* rdma_leave_multicast leaves the group joined with addr: EADDRNOTAVAIL if none, as
 * librdmacm answers; the QP is detached first (librdmacm ignores that outcome). */
int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct rl_cm_id *x = cm_id(id);
	size_t n = addr ? addr_len(addr) : 0;
	if (!n)
		return fail(EINVAL);
	struct rl_cm_mc **p = &x->mcs;
	while (*p && memcmp(&(*p)->addr, addr, n) != 0)
		p = &(*p)->next;
	struct rl_cm_mc *mc = *p;
	if (!mc)
		return fail(EADDRNOTAVAIL);
	*p = mc->next;
	if (mc->attached && id->qp)
		ibv_detach_mcast(id->qp, &mc->mgid, 0);
	free(mc);
	return 0;
}
