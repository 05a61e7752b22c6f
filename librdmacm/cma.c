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

struct rl_cm_channel {
	struct rdma_event_channel ch;
	uint32_t h;
	pthread_mutex_t mu;
	struct rl_cm_id *ids; /* the channel's identifiers, for events to name them */
};

/* What an identifier has done, for rdma_set_option's checks (the kernel's states). */
enum rl_cm_phase { RL_IDLE, RL_BOUND, RL_LISTENING, RL_ACTIVE };

struct rl_cm_id {
	struct rdma_cm_id id;
	uint32_t h;
	enum rl_cm_phase phase;
	struct rl_cm_channel *chan;
	struct rl_cm_id *next;
	struct rdma_conn_param offer; /* a connection request's parameters, for rdma_accept(id, NULL) */
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
	return &c->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct rl_cm_channel *c = cm_channel(channel);
	struct rl_handle h = {.handle = c->h};
	call(RL_OP_CM_DESTROY_CHANNEL, &h, sizeof(h), NULL, 0, -1);
	close(c->ch.fd);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* new_id makes the library's half of an identifier the service created as h. */
static struct rl_cm_id *new_id(struct rl_cm_channel *c, uint32_t h, void *context, enum rdma_port_space ps)
{
	struct rl_cm_id *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->h = h;
	x->chan = c;
	x->id.verbs = dev;
	x->id.channel = &c->ch;
	x->id.context = context;
	x->id.ps = ps;
	x->id.port_num = 1;
	x->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	pthread_mutex_lock(&c->mu);
	x->next = c->ids;
	c->ids = x;
	pthread_mutex_unlock(&c->mu);
	return x;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	if (!channel) {
		UNSUPPORTED("rdma_create_id without an event channel (synchronous identifiers)");
		return fail(EOPNOTSUPP);
	}
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP) { /* RC connections, UD through SIDR */
		UNSUPPORTED("rdma_create_id for a port space other than RDMA_PS_TCP and RDMA_PS_UDP");
		return fail(EOPNOTSUPP);
	}
	struct rl_cm_channel *c = cm_channel(channel);
	struct rl_cm_create_id req = {.channel = c->h, .port_space = ps};
	struct rl_handle h;
	if (call(RL_OP_CM_CREATE_ID, &req, sizeof(req), &h, sizeof(h), -1) < 0)
		return -1;
	struct rl_cm_id *x = new_id(c, h.handle, context, ps);
	if (!x) {
		call(RL_OP_CM_DESTROY_ID, &h, sizeof(h), NULL, 0, -1);
		return fail(ENOMEM);
	}
	*id = &x->id;
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct rl_cm_id *x = cm_id(id);
	struct rl_handle h = {.handle = x->h};
	int ret = call(RL_OP_CM_DESTROY_ID, &h, sizeof(h), NULL, 0, -1);
	struct rl_cm_channel *c = x->chan;
	pthread_mutex_lock(&c->mu);
	for (struct rl_cm_id **p = &c->ids; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			break;
		}
	pthread_mutex_unlock(&c->mu);
	free(x);
	return ret;
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

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	size_t n = addr ? addr_len(addr) : 0;
	if (!n)
		return fail(EAFNOSUPPORT);
	/* The agent binds when the identifier listens or resolves: rdma_listen and
	 * rdma_resolve_addr send this address. */
	memcpy(&id->route.addr.src_storage, addr, n);
	cm_id(id)->phase = RL_BOUND;
	return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
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

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr, int timeout_ms)
{
	if (!dst_addr || !addr_len(dst_addr))
		return fail(EAFNOSUPPORT);
	if (is_multicast(dst_addr)) { /* the first step of a multicast join */
		UNSUPPORTED("rdma_resolve_addr of a multicast address (multicast)");
		return fail(EOPNOTSUPP);
	}
	if (src_addr && rdma_bind_addr(id, src_addr) < 0)
		return -1;
	struct rl_cm_resolve_addr req = {.id = cm_id(id)->h, .timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0};
	if (to_wire_addr(&id->route.addr.src_addr, &req.src) < 0 || to_wire_addr(dst_addr, &req.dst) < 0)
		return -1;
	memcpy(&id->route.addr.dst_storage, dst_addr, addr_len(dst_addr));
	if (call(RL_OP_CM_RESOLVE_ADDR, &req, sizeof(req), NULL, 0, -1) < 0)
		return -1;
	cm_id(id)->phase = RL_ACTIVE;
	return 0;
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct rl_handle h = {.handle = cm_id(id)->h};
	return call(RL_OP_CM_RESOLVE_ROUTE, &h, sizeof(h), NULL, 0, -1);
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

int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	if (!attr->send_cq || !attr->recv_cq) {
		UNSUPPORTED("rdma_create_qp without CQs (the library creating them)");
		return fail(EOPNOTSUPP);
	}
	if (attr->qp_type != id->qp_type) {
		UNSUPPORTED("rdma_create_qp of a QP type other than the port space's (RC for RDMA_PS_TCP, UD for RDMA_PS_UDP)");
		return fail(EOPNOTSUPP);
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		UNSUPPORTED("rdma_create_qp without a PD (the library's default PD)");
		return fail(EOPNOTSUPP);
	}
	if (attr->pd->context != id->verbs)
		return fail(EINVAL);
	struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp)
		return -1;
	int err = init_qp(id, qp);
	if (err) {
		ibv_destroy_qp(qp);
		return fail(err);
	}
	id->qp = qp;
	id->pd = attr->pd;
	id->send_cq = attr->send_cq;
	id->recv_cq = attr->recv_cq;
	id->srq = attr->srq;
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	a.pd = pd;
	if (rdma_create_qp_ex(id, &a) < 0)
		return -1;
	qp_init_attr->cap = a.cap;
	return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
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
	return connecting(id, RL_OP_CM_CONNECT, conn_param, &dflt, id->ps == RDMA_PS_UDP ? 180 : 56);
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	/* a REP's private data, or a SIDR_REP's */
	return connecting(id, RL_OP_CM_ACCEPT, conn_param, &cm_id(id)->offer, id->ps == RDMA_PS_UDP ? 136 : 196);
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
	return call(RL_OP_CM_DISCONNECT, &h, sizeof(h), NULL, 0, -1);
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
 * path and the QP; REUSEADDR and AFONLY (an int each) are checked against the
 * identifier's state as the kernel does, and change nothing here: the agent refuses
 * a second listener on a port either way, and its wildcard listeners take both
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
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int) || !optval)
			return fail(EINVAL);
		if (x->phase != RL_IDLE && (!*(int *)optval || x->phase == RL_LISTENING))
			return fail(EINVAL); /* rdma_set_reuseaddr */
		return 0;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int) || !optval)
			return fail(EINVAL);
		if (x->phase != RL_IDLE && x->phase != RL_BOUND)
			return fail(EINVAL); /* rdma_set_afonly */
		return 0;
	}
	return fail(ENOSYS);
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
	u->ah_attr.is_global = 1;
	u->ah_attr.port_num = id->port_num;
	u->ah_attr.grh.dgid = id->route.addr.addr.ibaddr.dgid;
	u->ah_attr.grh.sgid_index = sgid_index(id->verbs, &id->route.addr.addr.ibaddr.sgid);
	u->ah_attr.grh.flow_label = w->flow_label;
	u->ah_attr.grh.hop_limit = 64;
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct rl_cm_channel *c = cm_channel(channel);
	struct rl_cm_event resp, *w = &resp;
	struct rl_cm_id *x;
	for (;;) {
		uint64_t token;
		ssize_t n;
		while ((n = read(c->ch.fd, &token, sizeof(token))) < 0 && errno == EINTR)
			;
		if (n < 0)
			return -1; /* EAGAIN: no event and a non-blocking fd */
		struct rl_handle h = {.handle = c->h};
		if (call(RL_OP_CM_GET_EVENT, &h, sizeof(h), &resp, sizeof(resp), -1) < 0)
			return -1;
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
		x = new_id(c, w->id, l ? l->id.context : NULL, l ? l->id.ps : RDMA_PS_TCP);
		if (!x) {
			free(e);
			return fail(ENOMEM);
		}
		e->ev.listen_id = l ? &l->id : NULL;
		x->phase = RL_ACTIVE;
		x->id.route.addr.src_addr.sa_family = l ? l->id.route.addr.src_addr.sa_family : 0;
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
	if (x->id.ps == RDMA_PS_UDP) /* param is a union: ud replaces conn */
		ud_event(&x->id, w, &e->ev, pdlen ? e->private_data : NULL, pdlen);
	*event = &e->ev;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	free(event);
	return 0;
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

/* ---- rdma_getaddrinfo: the system resolver's answer as one entry of the hints' port space (TCP by default) ---- */

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	struct addrinfo h = {.ai_socktype = SOCK_STREAM}, *ai;
	if (hints) {
		h.ai_family = hints->ai_family;
		h.ai_flags = (hints->ai_flags & RAI_PASSIVE ? AI_PASSIVE : 0) |
			     (hints->ai_flags & RAI_NUMERICHOST ? AI_NUMERICHOST : 0);
		if (hints->ai_flags & RAI_FAMILY) {
			UNSUPPORTED("rdma_getaddrinfo with RAI_FAMILY");
			return EAI_BADFLAGS;
		}
		if (hints->ai_port_space && hints->ai_port_space != RDMA_PS_TCP && hints->ai_port_space != RDMA_PS_UDP) {
			UNSUPPORTED("rdma_getaddrinfo for a port space other than RDMA_PS_TCP and RDMA_PS_UDP");
			return EAI_SERVICE;
		}
	}
	int ret = getaddrinfo(node, service, &h, &ai);
	if (ret)
		return ret;
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));
	struct sockaddr *sa = malloc(ai->ai_addrlen);
	if (!r || !sa) {
		free(r);
		free(sa);
		freeaddrinfo(ai);
		return EAI_MEMORY;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	if (r->ai_flags & RAI_PASSIVE) {
		r->ai_src_addr = sa;
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = sa;
		r->ai_dst_len = ai->ai_addrlen;
	}
	freeaddrinfo(ai);
	*res = r;
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

/* ---- rsockets: none exist here, so every descriptor is the kernel's ---- */

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout) { return poll(fds, nfds, timeout); }
