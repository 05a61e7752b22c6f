/*
 * Devices and contexts: finding the host's verbs service, the control protocol, the
 * device list, ibv_open_device and the query verbs.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "private.h"
#include "rocelab.h"

#undef ibv_query_port

int rl_errno_of(uint32_t code)
{
	switch (code) {
	case RL_CODE_INVALID_ARGUMENT:
		return EINVAL;
	case RL_CODE_NO_MEMORY:
		return ENOMEM;
	case RL_CODE_BUSY:
		return EBUSY;
	case RL_CODE_NOT_FOUND:
		return EINVAL; /* an unknown handle: the kernel's uverbs says EINVAL */
	case RL_CODE_UNRESOLVED:
		return EHOSTUNREACH;
	case RL_CODE_CLOSED:
		return ENODEV;
	case RL_CODE_NOT_SUPPORTED:
		return EOPNOTSUPP;
	case RL_CODE_PERMISSION:
		return EPERM;
	case RL_CODE_TOO_MANY_FILES:
		return EMFILE;
	case RL_CODE_ADDR_IN_USE:
		return EADDRINUSE;
	case RL_CODE_ADDR_NOT_AVAIL:
		return EADDRNOTAVAIL;
	default:
		return EPROTO;
	}
}

static int debug_enabled(void)
{
	static int v = -1;
	if (v < 0)
		v = getenv("ROCELAB_VERBS_DEBUG") != NULL;
	return v;
}

/* The address is $ROCELAB_VERBS_SOCKET, else @rocelab/<lab>/<host>/verbs from
 * $ROCELAB_LAB and $ROCELAB_HOST (service.Address; '@' is the abstract namespace). */
int rl_service_address(struct sockaddr_un *addr, socklen_t *len)
{
	char name[sizeof(addr->sun_path) + 1];
	const char *s = getenv("ROCELAB_VERBS_SOCKET");
	int n;
	if (s && *s)
		n = snprintf(name, sizeof(name), "%s", s);
	else {
		const char *lab = getenv("ROCELAB_LAB"), *host = getenv("ROCELAB_HOST");
		if (!lab || !*lab || !host || !*host)
			return -1;
		n = snprintf(name, sizeof(name), "@rocelab/%s/%s/verbs", lab, host);
	}
	if (n <= 0 || (size_t)n > sizeof(addr->sun_path))
		return -1;
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	memcpy(addr->sun_path, name, n);
	if (name[0] == '@') {
		addr->sun_path[0] = 0;
		*len = offsetof(struct sockaddr_un, sun_path) + n;
	} else
		*len = offsetof(struct sockaddr_un, sun_path) + n + 1;
	return 0;
}

int rl_connect(const struct sockaddr_un *addr, socklen_t addrlen)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)addr, addrlen) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int call_fd(int sock, uint32_t seq, uint16_t op, const void *req, size_t reqlen, void *resp,
		   size_t resplen, int sendfd, int *fds, int nfds)
{
	uint8_t buf[RL_MAX_MESSAGE];
	struct rl_header h = {.version = RL_WIRE_VERSION, .op = op, .word = seq};
	memcpy(buf, &h, sizeof(h));
	if (reqlen)
		memcpy(buf + sizeof(h), req, reqlen);
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(h) + reqlen};
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	memset(&cm, 0, sizeof(cm)); /* the padding CMSG_SPACE adds goes to the kernel too */
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (sendfd >= 0) {
		m.msg_control = cm.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sendfd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	/* EPIPE: the service closed at once, refusing us; its reason is still queued. */
	if (n != (ssize_t)iov.iov_len && !(n < 0 && errno == EPIPE))
		return ENODEV;

	memset(&m, 0, sizeof(m));
	iov.iov_len = sizeof(buf);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cm.b;
	m.msg_controllen = sizeof(cm.b);
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	int got[2], ngot = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (ngot < 2)
				got[ngot++] = fd;
			else
				close(fd);
		}
	}
	int err = 0;
	if (n <= 0 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		err = ENODEV;
	else if ((size_t)n < sizeof(h))
		err = EPROTO;
	else {
		memcpy(&h, buf, sizeof(h));
		if (h.version != RL_WIRE_VERSION || h.op != op)
			err = EPROTO;
		else if (h.word != RL_CODE_OK) {
			err = rl_errno_of(h.word);
			/* OPEN_XRCD names no handle: its NOT_FOUND is "the file has no domain and
			 * O_CREAT was not given", ENOENT as open(2) says it */
			if (op == RL_OP_OPEN_XRCD && h.word == RL_CODE_NOT_FOUND)
				err = ENOENT;
			if (debug_enabled())
				fprintf(stderr, "rocelab libibverbs: op %u: %.*s\n", op, (int)(n - sizeof(h)),
					buf + sizeof(h));
		} else if ((size_t)n - sizeof(h) != resplen || ngot != nfds)
			err = EPROTO;
		else if (resplen)
			memcpy(resp, buf + sizeof(h), resplen);
	}
	for (int i = 0; i < ngot; i++) {
		if (!err)
			fds[i] = got[i];
		else
			close(got[i]);
	}
	return err;
}

int rl_call(struct rl_context *ctx, uint16_t op, const void *req, size_t reqlen, void *resp,
	    size_t resplen, int sendfd, int *fds, int nfds)
{
	pthread_mutex_lock(&ctx->call_mu);
	int err = ctx->sock < 0 ? ENODEV : call_fd(ctx->sock, ++ctx->seq, op, req, reqlen, resp, resplen, sendfd, fds, nfds);
	if (err == ENODEV && ctx->sock >= 0) {
		close(ctx->sock); /* the service is gone: every later call fails the same way */
		ctx->sock = -1;
	}
	pthread_mutex_unlock(&ctx->call_mu);
	err = rl_fatal_errno(ctx, op, err);
	errno = err;
	return err;
}

/* hello opens a connection: the doorbell eventfd and page come back. */
static int hello(int sock, int fds[2])
{
	struct rl_hello req = {.min_version = RL_WIRE_VERSION, .max_version = RL_WIRE_VERSION};
	struct rl_hello_resp resp;
	return call_fd(sock, 0, RL_OP_HELLO, &req, sizeof(req), &resp, sizeof(resp), -1, fds, 2);
}

void *rl_map(int fd, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- device list ---- */

/* known_device is the process's one device, as rdma-core keeps each device once
 * however often the list is asked for: d the first time, afterwards the device first
 * made, updated from d (a lab made again has another node GUID), and d freed. Open
 * contexts keep pointing at it, so it is never freed. */
static struct rl_device *known_device(struct rl_device *d)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct rl_device *known;
	pthread_mutex_lock(&mu);
	if (!known)
		known = d;
	else if (known != d) {
		known->node_guid = d->node_guid;
		free(d);
	}
	d = known;
	pthread_mutex_unlock(&mu);
	return d;
}

struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list = calloc(2, sizeof(*list));
	if (num)
		*num = 0;
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	struct rl_device *d = calloc(1, sizeof(*d));
	if (!d) {
		free(list);
		errno = ENOMEM;
		return NULL;
	}
	if (rl_service_address(&d->addr, &d->addrlen) < 0) {
		free(d);
		return list; /* not in a lab host: no device, as on a machine without RNICs */
	}
	/* Ask the service now, so that the list holds only a device that answers and
	 * ibv_get_device_guid needs no connection of its own. */
	int sock = rl_connect(&d->addr, d->addrlen), fds[2];
	struct rl_device_attr a;
	if (sock < 0 || hello(sock, fds) != 0) {
		if (sock >= 0)
			close(sock);
		free(d);
		return list;
	}
	close(fds[0]);
	close(fds[1]);
	int err = call_fd(sock, 1, RL_OP_QUERY_DEVICE, NULL, 0, &a, sizeof(a), -1, NULL, 0);
	close(sock);
	if (err) {
		free(d);
		return list;
	}
	d->node_guid = a.node_guid;
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->dev.name, sizeof(d->dev.name), "%s", RL_DEVICE_NAME);
	snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs0");
	list[0] = &known_device(d)->dev;
	if (num)
		*num = 1;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	/* The device stays (known_device): an open context keeps pointing at it, as
	 * rdma-core's refcounted devices outlive the list. */
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	return htobe64(((struct rl_device *)device)->node_guid);
}

int ibv_get_device_index(struct ibv_device *device)
{
	(void)device;
	return 0;
}

/* ---- contexts ---- */

/* rl_gid_tbl_len is the port's gid_tbl_len: rxe's RXE_PORT_GID_TBL_LEN, whose entries
 * past the host's addresses are empty (a zero GID, ENODATA from ibv_query_gid_ex), so
 * that programs written for rxe see the same table (rdma-core's test_query_gid_ex_bad_flow
 * looks for an empty entry). */
#define RL_GID_TBL_LEN 1024

static uint32_t rl_gid_tbl_len(struct rl_context *ctx)
{
	return ctx->ngids > RL_GID_TBL_LEN ? ctx->ngids : RL_GID_TBL_LEN;
}

static int query_port_op(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len);
static int query_device_ex_op(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct rl_device *d = (struct rl_device *)device;
	struct rl_context *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->bell_fd = -1;
	ctx->sock = rl_connect(&d->addr, d->addrlen);
	if (ctx->sock < 0) {
		free(ctx);
		errno = ENODEV;
		return NULL;
	}
	pthread_mutex_init(&ctx->call_mu, NULL);
	int fds[2], err = hello(ctx->sock, fds);
	if (err)
		goto fail;
	ctx->bell_fd = fds[0];
	ctx->page = rl_map(fds[1], RL_PAGE_SIZE);
	close(fds[1]);
	if (!ctx->page) {
		err = ENOMEM;
		goto fail;
	}
	if ((err = rl_call(ctx, RL_OP_QUERY_DEVICE, NULL, 0, &ctx->dattr, sizeof(ctx->dattr), -1, NULL, 0)))
		goto fail;
	struct rl_query_port qp = {.port = 1};
	if ((err = rl_call(ctx, RL_OP_QUERY_PORT, &qp, sizeof(qp), &ctx->pattr, sizeof(ctx->pattr), -1, NULL, 0)))
		goto fail;
	ctx->ngids = ctx->pattr.gid_table_len;
	ctx->gids = calloc(ctx->ngids ? ctx->ngids : 1, sizeof(*ctx->gids));
	if (!ctx->gids) {
		err = ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < ctx->ngids; i++) {
		struct rl_query_gid q = {.index = i};
		if ((err = rl_call(ctx, RL_OP_QUERY_GID, &q, sizeof(q), ctx->gids[i].raw, 16, -1, NULL, 0)))
			goto fail;
	}
	struct ibv_context *c = &ctx->vctx.context;
	c->device = device;
	c->cmd_fd = ctx->sock;
	/* Asynchronous events: a semaphore eventfd the service increments once per queued
	 * event, so that poll and epoll see it readable exactly while one is pending and a
	 * read takes one (ibv_get_async_event). */
	c->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->async_fd < 0 || (err = rl_call(ctx, RL_OP_ASYNC_FD, NULL, 0, NULL, 0, c->async_fd, NULL, 0))) {
		err = c->async_fd < 0 ? errno : err;
		if (c->async_fd >= 0)
			close(c->async_fd);
		goto fail;
	}
	pthread_mutex_init(&ctx->objs_mu, NULL);
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(ctx->vctx);
	/* the device's ops, beside the context they belong to (as rdma-core's providers
	 * keep theirs, providers/rxe/rxe.c): the fast path (fastpath.c) and the extended
	 * verbs whose objects objects.c makes */
	ctx->vctx.query_port = query_port_op;
	ctx->vctx.query_device_ex = query_device_ex_op;
	ctx->vctx.create_cq_ex = rl_create_cq_ex;
	ctx->vctx.create_qp_ex = rl_create_qp_ex;
	ctx->vctx.open_xrcd = rl_open_xrcd;
	ctx->vctx.close_xrcd = rl_close_xrcd;
	ctx->vctx.create_srq_ex = rl_create_srq_ex;
	ctx->vctx.get_srq_num = rl_get_srq_num;
	ctx->vctx.open_qp = rl_open_qp;
	struct ibv_context_ops *ops = &c->ops;
	ops->poll_cq = rl_poll_cq;
	ops->req_notify_cq = rl_req_notify_cq;
	ops->post_send = rl_post_send;
	ops->post_recv = rl_post_recv;
	ops->post_srq_recv = rl_post_srq_recv;
	ops->alloc_mw = rl_alloc_mw;
	ops->dealloc_mw = rl_dealloc_mw;
	ops->bind_mw = rl_bind_mw;
	rl_fatal_start(ctx);
	return c;
fail:
	if (ctx->page)
		munmap(ctx->page, RL_PAGE_SIZE);
	if (ctx->bell_fd >= 0)
		close(ctx->bell_fd);
	if (ctx->sock >= 0)
		close(ctx->sock);
	free(ctx->gids);
	free(ctx);
	errno = err;
	return NULL;
}

int ibv_close_device(struct ibv_context *c)
{
	struct rl_context *ctx = rl_ctx(c);
	rl_fatal_stop(ctx); /* before the socket it watches closes */
	/* The service destroys what the connection held when it closes. Rings and MRs stay
	 * mapped here, so a stray access after close cannot fault. */
	if (ctx->sock >= 0)
		close(ctx->sock);
	close(ctx->bell_fd);
	close(c->async_fd);
	munmap(ctx->page, RL_PAGE_SIZE);
	free(ctx->gids);
	free(ctx->objs);
	free(ctx);
	return 0;
}

/* ---- queries ---- */

enum ibv_mtu rl_mtu_enum(uint32_t bytes)
{
	switch (bytes) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 1024:
		return IBV_MTU_1024;
	case 2048:
		return IBV_MTU_2048;
	case 4096:
		return IBV_MTU_4096;
	}
	return 0;
}

uint32_t rl_mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

static void fill_device_attr(struct rl_context *ctx, struct ibv_device_attr *a)
{
	struct rl_device_attr *d = &ctx->dattr;
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%.*s", (int)sizeof(d->fw_ver), d->fw_ver);
	a->node_guid = htobe64(d->node_guid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = 4096;
	a->vendor_id = 0xFFFFFF; /* rxe's */
	a->max_qp = d->max_qp;
	a->max_qp_wr = d->max_qp_wr;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
	a->max_mw = 65536;
	a->max_sge = d->max_sge;
	a->max_sge_rd = d->max_sge;
	a->max_cq = d->max_qp;
	a->max_cqe = d->max_cqe;
	a->max_mr = 65536;
	a->max_pd = 65536;
	a->max_qp_rd_atom = d->max_qp_rd_atom;
	a->max_res_rd_atom = d->max_qp_rd_atom * d->max_qp;
	a->max_qp_init_rd_atom = d->max_qp_init_rd_atom;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = 65536;
	a->max_srq = d->max_srq;
	a->max_srq_wr = d->max_qp_wr;
	a->max_srq_sge = d->max_sge;
	a->max_mcast_grp = d->max_mcast_grp;
	a->max_mcast_qp_attach = d->max_mcast_qp_attach;
	a->max_total_mcast_qp_attach = d->max_total_mcast_qp_attach;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = d->phys_port_cnt;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *attr)
{
	fill_device_attr(rl_ctx(c), attr);
	return 0;
}

static int query_device_ex_op(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len)
{
	if (in && in->comp_mask)
		return EINVAL;
	if (len < sizeof(attr->orig_attr))
		return EINVAL;
	memset(attr, 0, len);
	fill_device_attr(rl_ctx(c), &attr->orig_attr);
	if (len >= offsetof(struct ibv_device_attr_ex, phys_port_cnt_ex) + sizeof(attr->phys_port_cnt_ex))
		attr->phys_port_cnt_ex = attr->orig_attr.phys_port_cnt;
	return 0;
}

/* speed_width picks the IB lane speed and width whose product is the link rate. */
static void speed_width(uint64_t rate, uint8_t *speed, uint8_t *width)
{
	static const struct {
		uint8_t code;
		uint64_t mbps;
	} speeds[] = {{1, 2500}, {2, 5000}, {4, 10000}, {32, 25000}, {64, 50000}, {128, 100000}},
	  widths[] = {{1, 1}, {16, 2}, {2, 4}, {4, 8}, {8, 12}};
	uint64_t mbps = rate / 1000000, best = 0;
	*speed = 1;
	*width = 1;
	for (size_t s = 0; s < sizeof(speeds) / sizeof(speeds[0]); s++)
		for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
			uint64_t p = speeds[s].mbps * widths[w].mbps;
			if (p <= mbps && p > best) {
				best = p;
				*speed = speeds[s].code;
				*width = widths[w].code;
			}
		}
}

static int query_port_op(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	struct rl_context *ctx = rl_ctx(c);
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr a;
	memset(&a, 0, sizeof(a));
	struct rl_port_attr *p = &ctx->pattr;
	a.state = strcmp(p->state, "ACTIVE") == 0 ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a.max_mtu = rl_mtu_enum(p->max_mtu);
	a.active_mtu = rl_mtu_enum(p->active_mtu);
	a.gid_tbl_len = rl_gid_tbl_len(ctx);
	a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a.max_msg_sz = p->max_msg_sz;
	a.pkey_tbl_len = 1;
	a.max_vl_num = 1;
	a.phys_state = a.state == IBV_PORT_ACTIVE ? 5 : 3; /* LinkUp / Disabled */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	speed_width(p->rate, &a.active_speed, &a.active_width);
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

/* ibv_query_port for binaries older than the inline wrapper: the compat struct ends
 * before port_cap_flags2. */
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	int err = query_port_op(c, port, (struct ibv_port_attr *)attr, offsetof(struct ibv_port_attr, port_cap_flags2));
	errno = err;
	return err;
}

int rl_gid_index(struct rl_context *ctx, const union ibv_gid *gid)
{
	for (uint32_t i = 0; i < ctx->ngids; i++)
		if (memcmp(ctx->gids[i].raw, gid->raw, 16) == 0)
			return (int)i;
	return -1;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	struct rl_context *ctx = rl_ctx(c);
	if (port != 1 || index < 0 || (uint32_t)index >= rl_gid_tbl_len(ctx)) {
		errno = EINVAL;
		return -1;
	}
	if ((uint32_t)index >= ctx->ngids) /* an empty entry: rdma-core's ibv_query_gid gives zeros */
		memset(gid, 0, sizeof(*gid));
	else
		*gid = ctx->gids[index];
	return 0;
}

/* ifindex_of finds the netdev holding the GID's address (the host's TAP). */
static uint32_t ifindex_of(const union ibv_gid *gid)
{
	struct ifaddrs *ifs, *i;
	uint32_t idx = 0;
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !idx; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET && memcmp(gid->raw, v4mapped, 12) == 0 &&
		    memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, gid->raw + 12, 4) == 0)
			idx = if_nametoindex(i->ifa_name);
		if (i->ifa_addr->sa_family == AF_INET6 &&
		    memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, gid->raw, 16) == 0)
			idx = if_nametoindex(i->ifa_name);
	}
	freeifaddrs(ifs);
	return idx;
}

static int gid_entry(struct rl_context *ctx, uint32_t index, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->gid = ctx->gids[index];
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2; /* as rxe's, every entry is RoCE v2 (see docs/libibverbs.md) */
	e->ndev_ifindex = ifindex_of(&e->gid);
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	struct rl_context *ctx = rl_ctx(c);
	if (flags || entry_size < sizeof(*entry) || port != 1 || index >= rl_gid_tbl_len(ctx))
		return EINVAL;
	if (index >= ctx->ngids)
		return ENODATA; /* an empty entry, as the kernel answers */
	return gid_entry(ctx, index, entry);
}

ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	struct rl_context *ctx = rl_ctx(c);
	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < ctx->ngids)
		return -EINVAL;
	for (uint32_t i = 0; i < ctx->ngids; i++)
		gid_entry(ctx, i, (struct ibv_gid_entry *)((char *)entries + i * entry_size));
	return ctx->ngids;
}

/* ibv_query_gid_type (IBVERBS_PRIVATE_34, which ibv_devinfo calls): every GID is
 * RoCEv2 (enum ibv_gid_type_sysfs: IB_ROCE_V1 = 0, ROCE_V2 = 1). */
int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, int *type)
{
	struct rl_context *ctx = rl_ctx(c);
	if (port != 1 || index >= ctx->ngids) {
		errno = EINVAL;
		return -1;
	}
	*type = 1;
	return 0;
}

int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	(void)c;
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xFFFF);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
	(void)c;
	if (port != 1 || be16toh(pkey) != 0xFFFF) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* ---- sysfs helpers (real: read a file) ---- */

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char *path;
	if (asprintf(&path, "%s/%s", dir, file) < 0)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n <= 0)
		return -1;
	if ((size_t)n == size)
		n--;
	buf[n] = 0;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	return n;
}

const char *ibv_get_sysfs_path(void)
{
	const char *env = getenv("SYSFS_PATH");
	return env && *env ? env : "/sys";
}

/* ---- unsupported verbs ---- */

void rl_unsupported(const char *verb)
{
	/* one line per verb: a small fixed table of the names already reported */
	static const char *seen[64];
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int report = 1;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 64 && seen[i]; i++)
		if (seen[i] == verb)
			report = 0;
	for (int i = 0; report && i < 64; i++)
		if (!seen[i]) {
			seen[i] = verb;
			break;
		}
	pthread_mutex_unlock(&mu);
	if (report)
		fprintf(stderr, "rocelab libibverbs: %s is not supported by rocelab's soft-RNIC (EOPNOTSUPP)\n", verb);
	errno = EOPNOTSUPP;
}

/* ---- for librdmacm.so.1 (private.h) ---- */

int rocelab_call(struct ibv_context *context, uint16_t op, const void *req, size_t reqlen, void *resp,
		 size_t resplen, int sendfd)
{
	return rl_call(rl_ctx(context), op, req, reqlen, resp, resplen, sendfd, NULL, 0);
}

uint32_t rocelab_qp_handle(struct ibv_qp *qp) { return rl_container(qp, struct rl_qp)->h; }
