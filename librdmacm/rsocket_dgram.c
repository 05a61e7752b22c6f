/*
 * Datagram rsockets (rsocket(AF_INET/AF_INET6, SOCK_DGRAM, 0)) with rdma-core's wire
 * protocol, so that a rocelab host and an rdma-core host exchange datagrams
 * (docs/rdmacm.md, "Datagram rsockets"):
 *
 *  - An rsocket is a UDP socket (its descriptor is the rsocket's) and one UD QP per
 *    local source address, on an RDMA_PS_UDP identifier bound to that address and the
 *    UDP socket's port, with rdma_cm's UDP Q_Key 0x01234567.
 *  - A datagram to a peer whose QP is not yet known goes over the UDP socket behind a
 *    struct ds_udp_header: tag 0x55555555, version 4|6, op DATA (0), the header's
 *    length (16|28), the sender's QPN and its QP's source address. The receiver answers
 *    an op CTRL (7) header carrying its own QPN, and both sides make an address handle
 *    to the other's QPN; later datagrams go as UD SENDs.
 *  - A UD SEND's payload begins with a struct ds_header naming the sender's UDP
 *    address (version 4|6, length 8|24, port, IPv4 address or flow info and IPv6
 *    address): rrecvfrom reports it as the datagram's source.
 *
 * A datagram is at most RS_SNDLOWAT (2048) bytes with its ds_header, and at most the
 * port's MTU, since a UD message is one packet: with a 1024-byte MTU, 1016 bytes of
 * payload over IPv4, 1000 over IPv6 (EMSGSIZE beyond; rdma-core posts it, and the
 * datagram is lost). Received datagrams that do not
 * follow the protocol are dropped, as are those that find no room (as UDP's are).
 * rdma-core runs the UDP side in a thread of the library; here every call on the
 * rsocket (send, receive, rpoll) serves it, so a peer's first datagrams and their
 * answer wait for the application's next call, as a UDP datagram waits in its socket.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "rsocket_dgram.h"

#define RS_SNDLOWAT 2048     /* rdma-core's: a datagram slot, header included */
#define RS_QP_MAX_SIZE 0xFFFE
#define DS_UDP_TAG 0x55555555
#define DS_UDP_IPV4_HDR_LEN 16
#define DS_UDP_IPV6_HDR_LEN 28
#define DS_IPV4_HDR_LEN 8
#define DS_IPV6_HDR_LEN 24
#define DS_GRH_LEN 40        /* struct ibv_grh, ahead of every UD receive */
#define DS_UDP_SLOTS 32      /* datagrams that came over UDP, waiting to be read */
#define DS_MAX_DESTS 1024    /* peers with an address handle: a bound on memory */
#define DS_UDP_BATCH 64      /* UDP datagrams taken per call */
#define DS_WR_RECV (1ULL << 63)

enum { RS_OP_DATA = 0, RS_OP_CTRL = 7 };

struct ds_udp_header {
	uint32_t tag; /* big-endian, as every field */
	uint8_t version;
	uint8_t op;
	uint8_t length;
	uint8_t reserved;
	uint32_t qpn; /* the low 24 bits */
	union {
		uint32_t ipv4;
		uint8_t ipv6[16];
	} addr;
} __attribute__((packed));

struct ds_header {
	uint8_t version;
	uint8_t length;
	uint16_t port;
	union {
		uint32_t ipv4;
		struct {
			uint32_t flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
} __attribute__((packed));

union sockaddr_any {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr_storage ss;
};

/* A UD QP of one local source address. */
struct ds_qp {
	struct ds_qp *next;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	int armed;
	struct ds_header hdr; /* this QP's source, ahead of each of its sends */
	uint32_t max_len;     /* the largest datagram it sends, its ds_header excluded */
	uint8_t *rbuf;        /* rq_size slots of RS_SNDLOWAT, then the GRHs' landing */
	struct ibv_mr *rmr, *smr;
};

/* A peer's UDP address, the QP that sends to it, and its QP once known. */
struct ds_dest {
	struct ds_dest *next;
	union sockaddr_any addr;
	struct ds_qp *qp;
	struct ibv_ah *ah;
	uint32_t qpn;
};

/* A received datagram: in a QP's receive slot, or (qp NULL) in a UDP slot; either
 * begins with a ds_header. */
struct ds_rmsg {
	struct ds_qp *qp;
	uint32_t offset, length;
};

struct dsock {
	pthread_mutex_t mu;
	int udp, epfd, domain;
	int rd_shut, wr_shut;
	/* fixed at the first QP */
	uint32_t sq_size, rq_size, sq_inline, sbuf_size, rbuf_size;
	int sized;
	uint8_t *sbuf; /* sq_size send slots, shared by the QPs */
	uint32_t *sfree, nsfree;
	struct ds_qp *qps;
	struct ds_dest *dests, *conn;
	int ndests;
	struct ds_rmsg *rmsg; /* a ring of rq_size + DS_UDP_SLOTS + 1 */
	uint32_t rmsg_len, rmsg_head, rmsg_tail;
	uint8_t *ubuf; /* DS_UDP_SLOTS slots of RS_SNDLOWAT */
	uint32_t ufree[DS_UDP_SLOTS], nufree;
};

static int fail(int err)
{
	errno = err;
	return -1;
}

static socklen_t addr_len(int family)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int same_addr(const union sockaddr_any *a, const struct sockaddr *b)
{
	if (a->sa.sa_family != b->sa_family)
		return 0;
	if (b->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)b;
		return a->sin.sin_port == s->sin_port && a->sin.sin_addr.s_addr == s->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *s = (const void *)b;
	return a->sin6.sin6_port == s->sin6_port && !memcmp(&a->sin6.sin6_addr, &s->sin6_addr, 16);
}

/* port_of is a's port field, of whichever family. */
static in_port_t *port_of(union sockaddr_any *a)
{
	return a->sa.sa_family == AF_INET ? &a->sin.sin_port : &a->sin6.sin6_port;
}

static int any_addr(const union sockaddr_any *a)
{
	if (a->sa.sa_family == AF_INET)
		return a->sin.sin_addr.s_addr == htonl(INADDR_ANY);
	return !memcmp(&a->sin6.sin6_addr, &in6addr_any, 16);
}

static void format_hdr(struct ds_header *h, const union sockaddr_any *a)
{
	memset(h, 0, sizeof(*h));
	if (a->sa.sa_family == AF_INET) {
		h->version = 4;
		h->length = DS_IPV4_HDR_LEN;
		h->port = a->sin.sin_port;
		h->addr.ipv4 = a->sin.sin_addr.s_addr;
	} else {
		h->version = 6;
		h->length = DS_IPV6_HDR_LEN;
		h->port = a->sin6.sin6_port;
		h->addr.ipv6.flowinfo = a->sin6.sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &a->sin6.sin6_addr, 16);
	}
}

/* valid_hdr tells whether n bytes at h begin with a whole ds_header. */
static int valid_hdr(const struct ds_header *h, uint32_t n)
{
	return n >= DS_IPV4_HDR_LEN && ((h->version == 4 && h->length == DS_IPV4_HDR_LEN) ||
					(h->version == 6 && h->length == DS_IPV6_HDR_LEN && n >= DS_IPV6_HDR_LEN));
}

static void hdr_source(const struct ds_header *h, union sockaddr_any *a)
{
	memset(a, 0, sizeof(*a));
	if (h->version == 4) {
		a->sin.sin_family = AF_INET;
		a->sin.sin_port = h->port;
		a->sin.sin_addr.s_addr = h->addr.ipv4;
	} else {
		a->sin6.sin6_family = AF_INET6;
		a->sin6.sin6_port = h->port;
		a->sin6.sin6_flowinfo = h->addr.ipv6.flowinfo;
		memcpy(&a->sin6.sin6_addr, h->addr.ipv6.addr, 16);
	}
}

/* ---- the socket ---- */

/* kernel_socket is a kernel socket made by the system call itself: under
 * librspreload.so, socket() is the preload's, which would make it another rsocket (and
 * local_source's, made inside an rsendto, one more, without end). The other calls on
 * these descriptors reach the kernel through the preload, which knows them as not its
 * own. */
static int kernel_socket(int domain, int type)
{
	return syscall(SYS_socket, domain, type, 0);
}

struct dsock *ds_open(int domain, int flags, int *fd)
{
	struct dsock *ds = calloc(1, sizeof(*ds));
	if (!ds) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&ds->mu, NULL);
	ds->domain = domain;
	ds->epfd = -1;
	/* rdma-core's defaults */
	ds->sq_size = ds->rq_size = 384;
	ds->sq_inline = 64;
	ds->sbuf_size = ds->rbuf_size = 1 << 17;
	if ((ds->udp = kernel_socket(domain, SOCK_DGRAM | SOCK_NONBLOCK | (flags & SOCK_CLOEXEC))) < 0 || (ds->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		int err = errno;
		ds_close(ds);
		errno = err;
		return NULL;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = ds->udp};
	if (epoll_ctl(ds->epfd, EPOLL_CTL_ADD, ds->udp, &ev)) {
		int err = errno;
		ds_close(ds);
		errno = err;
		return NULL;
	}
	*fd = ds->udp;
	return ds;
}

static void free_qp(struct ds_qp *qp)
{
	if (qp->id && qp->id->qp)
		rdma_destroy_qp(qp->id);
	if (qp->cq)
		ibv_destroy_cq(qp->cq);
	if (qp->ch)
		ibv_destroy_comp_channel(qp->ch);
	if (qp->smr)
		ibv_dereg_mr(qp->smr);
	if (qp->rmr)
		ibv_dereg_mr(qp->rmr);
	if (qp->id)
		rdma_destroy_id(qp->id);
	free(qp->rbuf);
	free(qp);
}

void ds_close(struct dsock *ds)
{
	while (ds->dests) {
		struct ds_dest *d = ds->dests;
		ds->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	while (ds->qps) {
		struct ds_qp *qp = ds->qps;
		ds->qps = qp->next;
		free_qp(qp);
	}
	if (ds->epfd >= 0)
		close(ds->epfd);
	if (ds->udp >= 0)
		close(ds->udp);
	free(ds->sbuf);
	free(ds->sfree);
	free(ds->rmsg);
	free(ds->ubuf);
	pthread_mutex_destroy(&ds->mu);
	free(ds);
}

/* size fixes the queues and buffers at the first QP, as rdma-core's ds_set_qp_size:
 * a slot of RS_SNDLOWAT per work request, as many as the buffers hold. */
static int size(struct dsock *ds)
{
	if (ds->sized)
		return 0;
	if (ds->rq_size > ds->rbuf_size / RS_SNDLOWAT)
		ds->rq_size = ds->rbuf_size / RS_SNDLOWAT;
	if (ds->sq_size > ds->sbuf_size / RS_SNDLOWAT)
		ds->sq_size = ds->sbuf_size / RS_SNDLOWAT;
	if (ds->rq_size < 1)
		ds->rq_size = 1;
	if (ds->sq_size < 1)
		ds->sq_size = 1;
	ds->rbuf_size = ds->rq_size * RS_SNDLOWAT;
	ds->sbuf_size = ds->sq_size * RS_SNDLOWAT;
	ds->rmsg_len = ds->rq_size + DS_UDP_SLOTS + 1;
	if (!(ds->sbuf = malloc(ds->sbuf_size)) || !(ds->sfree = malloc(ds->sq_size * sizeof(uint32_t))) ||
	    !(ds->rmsg = calloc(ds->rmsg_len, sizeof(*ds->rmsg))) || !(ds->ubuf = malloc(DS_UDP_SLOTS * RS_SNDLOWAT)))
		return fail(ENOMEM);
	for (uint32_t i = 0; i < ds->sq_size; i++)
		ds->sfree[ds->nsfree++] = i * RS_SNDLOWAT;
	for (uint32_t i = 0; i < DS_UDP_SLOTS; i++)
		ds->ufree[ds->nufree++] = i * RS_SNDLOWAT;
	ds->sized = 1;
	return 0;
}

static int post_recv(struct dsock *ds, struct ds_qp *qp, uint32_t offset)
{
	struct ibv_sge sge[2] = {
		{.addr = (uintptr_t)qp->rbuf + ds->rbuf_size, .length = DS_GRH_LEN, .lkey = qp->rmr->lkey},
		{.addr = (uintptr_t)qp->rbuf + offset, .length = RS_SNDLOWAT, .lkey = qp->rmr->lkey},
	};
	struct ibv_recv_wr wr = {.wr_id = DS_WR_RECV | offset, .sg_list = sge, .num_sge = 2}, *bad;
	return ibv_post_recv(qp->id->qp, &wr, &bad) ? fail(errno ? errno : EIO) : 0;
}

/* new_qp makes the UD QP of source address src (its port the UDP socket's). */
static struct ds_qp *new_qp(struct dsock *ds, const union sockaddr_any *src)
{
	struct ds_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	format_hdr(&qp->hdr, src);
	union sockaddr_any bind_to = *src;
	if (size(ds) || rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP) || rdma_bind_addr(qp->id, &bind_to.sa) ||
	    !(qp->ch = ibv_create_comp_channel(qp->id->verbs)))
		goto err;
	/* the epoll descriptor tells when to read it, and a read never blocks */
	if (fcntl(qp->ch->fd, F_SETFL, fcntl(qp->ch->fd, F_GETFL) | O_NONBLOCK) < 0)
		goto err;
	if (!(qp->cq = ibv_create_cq(qp->id->verbs, ds->sq_size + ds->rq_size, qp, qp->ch, 0)))
		goto err;
	struct ibv_qp_init_attr a = {
		.qp_context = qp,
		.send_cq = qp->cq,
		.recv_cq = qp->cq,
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = ds->sq_size, .max_recv_wr = ds->rq_size, .max_send_sge = 1, .max_recv_sge = 2,
			.max_inline_data = ds->sq_inline},
	};
	if (rdma_create_qp(qp->id, NULL, &a))
		goto err;
	ds->sq_inline = a.cap.max_inline_data;
	/* a UD message is one packet: a slot, or the port's MTU if smaller */
	struct ibv_port_attr pa;
	if (ibv_query_port(qp->id->verbs, qp->id->port_num, &pa))
		goto err;
	uint32_t mtu = 128u << pa.active_mtu;
	qp->max_len = (mtu < RS_SNDLOWAT ? mtu : RS_SNDLOWAT) - qp->hdr.length;
	if (!(qp->rbuf = malloc(ds->rbuf_size + DS_GRH_LEN)) ||
	    !(qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf, ds->rbuf_size + DS_GRH_LEN, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp->smr = ibv_reg_mr(qp->id->pd, ds->sbuf, ds->sbuf_size, 0)))
		goto err;
	for (uint32_t i = 0; i < ds->rq_size; i++)
		if (post_recv(ds, qp, i * RS_SNDLOWAT))
			goto err;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = qp};
	if (epoll_ctl(ds->epfd, EPOLL_CTL_ADD, qp->ch->fd, &ev))
		goto err;
	qp->next = ds->qps;
	ds->qps = qp;
	return qp;
err:;
	int err = errno ? errno : EIO;
	free_qp(qp);
	errno = err;
	return NULL;
}

/* local_source is the UDP socket's address as a peer at dst sees it: its port, and
 * its address or, bound to the wildcard, the address the kernel's route to dst takes.
 * An unbound socket is bound to an ephemeral port first, so that the port the QPs'
 * headers name is the one the UDP datagrams come from. */
static int local_source(struct dsock *ds, const struct sockaddr *dst, union sockaddr_any *src)
{
	socklen_t n = sizeof(*src);
	if (getsockname(ds->udp, &src->sa, &n))
		return -1;
	if (*port_of(src) == 0) {
		union sockaddr_any any = {.sa.sa_family = ds->domain};
		if (bind(ds->udp, &any.sa, addr_len(ds->domain)))
			return -1;
		n = sizeof(*src);
		if (getsockname(ds->udp, &src->sa, &n))
			return -1;
	}
	if (!any_addr(src))
		return 0;
	in_port_t port = *port_of(src);
	int s = kernel_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC);
	if (s < 0)
		return -1;
	n = sizeof(*src);
	int ret = connect(s, dst, addr_len(dst->sa_family)) || getsockname(s, &src->sa, &n) ? -1 : 0;
	close(s);
	*port_of(src) = port;
	return ret;
}

static struct ds_qp *qp_of(struct dsock *ds, const union sockaddr_any *src)
{
	for (struct ds_qp *qp = ds->qps; qp; qp = qp->next) {
		union sockaddr_any a;
		hdr_source(&qp->hdr, &a);
		if (same_addr(&a, &src->sa))
			return qp;
	}
	return new_qp(ds, src);
}

/* dest_of is the destination dst, made (with the QP of its source) on first use. */
static struct ds_dest *dest_of(struct dsock *ds, const struct sockaddr *dst)
{
	for (struct ds_dest *d = ds->dests; d; d = d->next)
		if (same_addr(&d->addr, dst))
			return d;
	if (ds->ndests >= DS_MAX_DESTS) {
		errno = ENOBUFS;
		return NULL;
	}
	union sockaddr_any src;
	struct ds_qp *qp;
	if (local_source(ds, dst, &src) || !(qp = qp_of(ds, &src)))
		return NULL;
	struct ds_dest *d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(&d->addr, dst, addr_len(dst->sa_family));
	d->qp = qp;
	d->next = ds->dests;
	ds->dests = d;
	ds->ndests++;
	return d;
}

/* make_ah gives d an address handle to the peer's QP qpn, resolving the route as
 * rdma-core's UDP service does (a passing identifier's rdma_resolve_addr/route). */
static void make_ah(struct ds_dest *d, uint32_t qpn)
{
	if (d->ah) {
		ibv_destroy_ah(d->ah);
		d->ah = NULL;
	}
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return;
	union sockaddr_any src;
	hdr_source(&d->qp->hdr, &src);
	*port_of(&src) = 0;
	union sockaddr_any dst = d->addr;
	if (rdma_resolve_addr(id, &src.sa, &dst.sa, 2000) == 0 && rdma_resolve_route(id, 2000) == 0) {
		struct ibv_ah_attr a;
		rl_route_ah(id, 0, &a);
		d->ah = ibv_create_ah(d->qp->id->pd, &a);
		d->qpn = qpn;
	}
	rdma_destroy_id(id);
}

/* send_udp sends len bytes of data over the UDP socket to d, behind a ds_udp_header. */
static ssize_t send_udp(struct dsock *ds, struct ds_dest *d, uint8_t op, const void *data, size_t len)
{
	struct ds_udp_header h = {.tag = htobe32(DS_UDP_TAG), .op = op, .qpn = htobe32(d->qp->id->qp->qp_num & 0xFFFFFF)};
	h.version = d->qp->hdr.version;
	if (h.version == 4) {
		h.length = DS_UDP_IPV4_HDR_LEN;
		h.addr.ipv4 = d->qp->hdr.addr.ipv4;
	} else {
		h.length = DS_UDP_IPV6_HDR_LEN;
		memcpy(h.addr.ipv6, d->qp->hdr.addr.ipv6.addr, 16);
	}
	struct iovec v[2] = {{.iov_base = &h, .iov_len = h.length}, {.iov_base = (void *)data, .iov_len = len}};
	struct msghdr m = {.msg_name = &d->addr, .msg_namelen = addr_len(d->addr.sa.sa_family), .msg_iov = v,
			   .msg_iovlen = len ? 2 : 1};
	ssize_t n = sendmsg(ds->udp, &m, 0);
	return n < 0 ? -1 : n - h.length;
}

/* ---- receiving ---- */

static uint32_t queued(const struct dsock *ds)
{
	if (!ds->sized)
		return 0; /* no ring yet */
	return (ds->rmsg_tail + ds->rmsg_len - ds->rmsg_head) % ds->rmsg_len;
}

static int queue(struct dsock *ds, struct ds_qp *qp, uint32_t offset, uint32_t length)
{
	if (queued(ds) == ds->rmsg_len - 1)
		return -1;
	ds->rmsg[ds->rmsg_tail] = (struct ds_rmsg){.qp = qp, .offset = offset, .length = length};
	ds->rmsg_tail = (ds->rmsg_tail + 1) % ds->rmsg_len;
	return 0;
}

static int valid_udp_hdr(const struct ds_udp_header *h, ssize_t n, const union sockaddr_any *from)
{
	if (n < DS_UDP_IPV4_HDR_LEN || be32toh(h->tag) != DS_UDP_TAG || (h->op != RS_OP_DATA && h->op != RS_OP_CTRL))
		return 0;
	if (h->version == 4)
		return from->sa.sa_family == AF_INET && h->length == DS_UDP_IPV4_HDR_LEN;
	return h->version == 6 && from->sa.sa_family == AF_INET6 && h->length == DS_UDP_IPV6_HDR_LEN &&
	       n >= DS_UDP_IPV6_HDR_LEN;
}

/* take_udp serves the UDP socket, as rdma-core's UDP service: a peer's DATA is
 * answered with our QPN (CTRL) and queued as if it had come as a UD SEND; DATA and
 * CTRL both give the peer's destination an address handle to the QPN they carry. */
static void take_udp(struct dsock *ds)
{
	uint8_t buf[RS_SNDLOWAT + DS_UDP_IPV6_HDR_LEN];
	for (int i = 0; i < DS_UDP_BATCH; i++) {
		union sockaddr_any from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(ds->udp, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, &from.sa, &flen);
		if (n < 0)
			return;
		struct ds_udp_header *h = (struct ds_udp_header *)buf;
		if (n > (ssize_t)sizeof(buf) || !valid_udp_hdr(h, n, &from))
			continue;
		struct ds_dest *d = dest_of(ds, &from.sa);
		if (!d)
			continue;
		uint32_t qpn = be32toh(h->qpn) & 0xFFFFFF;
		if (h->op == RS_OP_DATA)
			send_udp(ds, d, RS_OP_CTRL, NULL, 0);
		if (!d->ah || d->qpn != qpn)
			make_ah(d, qpn);
		uint32_t len = n - h->length;
		if (h->op != RS_OP_DATA || ds->rd_shut || !ds->nufree)
			continue;
		struct ds_header hdr;
		format_hdr(&hdr, &from);
		if (len + hdr.length > RS_SNDLOWAT)
			continue;
		uint32_t off = ds->ufree[ds->nufree - 1];
		memcpy(ds->ubuf + off, &hdr, hdr.length);
		memcpy(ds->ubuf + off + hdr.length, buf + h->length, len);
		if (queue(ds, NULL, off, hdr.length + len) == 0)
			ds->nufree--;
	}
}

/* take_cq_events consumes the channels' pending events, so that the epoll descriptor
 * sleeps again, and notes the CQs to arm. */
static void take_cq_events(struct dsock *ds)
{
	for (struct ds_qp *qp = ds->qps; qp; qp = qp->next) {
		struct ibv_cq *cq;
		void *ctx;
		if (qp->armed && ibv_get_cq_event(qp->ch, &cq, &ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			qp->armed = 0;
		}
	}
}

/* poll_cqs takes the QPs' completions: receives that carry a ds_header are queued
 * (others, and those without room, are posted again: dropped); sends free their slot. */
static void poll_cqs(struct dsock *ds)
{
	for (struct ds_qp *qp = ds->qps; qp; qp = qp->next) {
		struct ibv_wc wc[16];
		int n;
		while ((n = ibv_poll_cq(qp->cq, 16, wc)) > 0) {
			for (int i = 0; i < n; i++) {
				uint32_t off = (uint32_t)wc[i].wr_id;
				if (!(wc[i].wr_id & DS_WR_RECV)) {
					ds->sfree[ds->nsfree++] = off;
					continue;
				}
				if (wc[i].status != IBV_WC_SUCCESS)
					continue; /* flushed: the QP is going */
				uint32_t len = wc[i].byte_len > DS_GRH_LEN ? wc[i].byte_len - DS_GRH_LEN : 0;
				if (len > RS_SNDLOWAT || !valid_hdr((struct ds_header *)(qp->rbuf + off), len) ||
				    ds->rd_shut || queue(ds, qp, off, len))
					post_recv(ds, qp, off);
			}
		}
	}
}

static void progress_now(struct dsock *ds)
{
	take_cq_events(ds);
	take_udp(ds);
	poll_cqs(ds);
}

/* arm asks every CQ for an event at its next completion; it tells whether it armed
 * one (a completion before that made no event: look again before sleeping). */
static int arm(struct dsock *ds)
{
	int armed = 0;
	for (struct ds_qp *qp = ds->qps; qp; qp = qp->next)
		if (!qp->armed) {
			ibv_req_notify_cq(qp->cq, 0);
			qp->armed = armed = 1;
		}
	return armed;
}

/* progress serves the socket until ready(ds) or, blocking, sleeps on the epoll
 * descriptor (with ds->mu released); non-blocking it fails with EAGAIN. */
static int progress(struct dsock *ds, int nonblock, int (*ready)(const struct dsock *))
{
	for (;;) {
		progress_now(ds);
		if (ready(ds))
			return 0;
		if (nonblock)
			return fail(EAGAIN);
		if (arm(ds))
			continue;
		struct pollfd p = {.fd = ds->epfd, .events = POLLIN};
		pthread_mutex_unlock(&ds->mu);
		int n = poll(&p, 1, -1);
		pthread_mutex_lock(&ds->mu);
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

static int have_data(const struct dsock *ds)
{
	return queued(ds) > 0 || ds->rd_shut;
}

static int have_slot(const struct dsock *ds)
{
	return ds->nsfree > 0;
}

ssize_t ds_recv(struct dsock *ds, const struct iovec *iov, int iovcnt, int flags, int nonblock, struct sockaddr *src,
		socklen_t *srclen, int *msg_flags)
{
	pthread_mutex_lock(&ds->mu);
	ssize_t ret = -1;
	if (!ds->sized && size(ds))
		goto out;
	if (progress(ds, nonblock, have_data))
		goto out;
	ret = 0;
	if (!queued(ds))
		goto out; /* shut for reading */
	struct ds_rmsg *m = &ds->rmsg[ds->rmsg_head];
	uint8_t *p = m->qp ? m->qp->rbuf + m->offset : ds->ubuf + m->offset;
	struct ds_header *h = (struct ds_header *)p;
	uint32_t left = m->length - h->length;
	const uint8_t *data = p + h->length;
	for (int i = 0; i < iovcnt && left; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
		memcpy(iov[i].iov_base, data, n);
		data += n;
		left -= n;
		ret += n;
	}
	if (msg_flags && left)
		*msg_flags |= MSG_TRUNC;
	if (flags & MSG_TRUNC)
		ret = m->length - h->length;
	if (src && srclen) {
		union sockaddr_any a;
		hdr_source(h, &a);
		socklen_t n = addr_len(a.sa.sa_family);
		memcpy(src, &a, *srclen < n ? *srclen : n);
		*srclen = n;
	}
	if (!(flags & MSG_PEEK)) {
		if (m->qp)
			post_recv(ds, m->qp, m->offset);
		else
			ds->ufree[ds->nufree++] = m->offset;
		ds->rmsg_head = (ds->rmsg_head + 1) % ds->rmsg_len;
	}
out:
	pthread_mutex_unlock(&ds->mu);
	return ret;
}

/* ---- sending ---- */

static ssize_t send_locked(struct dsock *ds, const struct iovec *iov, int iovcnt, const struct sockaddr *dst,
			   int nonblock)
{
	if (ds->wr_shut)
		return fail(EPIPE);
	if (!ds->sized && size(ds))
		return -1;
	struct ds_dest *d = ds->conn;
	if (dst && !(d = dest_of(ds, dst)))
		return -1;
	if (!d)
		return fail(EDESTADDRREQ);
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > d->qp->max_len)
		return fail(EMSGSIZE);
	uint8_t data[RS_SNDLOWAT];
	size_t off = d->qp->hdr.length;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	if (!d->ah) {
		/* the peer's QP is not known yet: over UDP, as rdma-core's first datagrams */
		for (;;) {
			ssize_t n = send_udp(ds, d, RS_OP_DATA, data + d->qp->hdr.length, len);
			if (n >= 0 || errno != EAGAIN || nonblock)
				return n;
			struct pollfd p = {.fd = ds->udp, .events = POLLOUT};
			pthread_mutex_unlock(&ds->mu);
			poll(&p, 1, -1);
			pthread_mutex_lock(&ds->mu);
		}
	}
	if (progress(ds, nonblock, have_slot))
		return -1;
	uint32_t slot = ds->sfree[--ds->nsfree];
	memcpy(data, &d->qp->hdr, d->qp->hdr.length);
	memcpy(ds->sbuf + slot, data, off);
	struct ibv_sge sge = {.addr = (uintptr_t)ds->sbuf + slot, .length = off, .lkey = d->qp->smr->lkey};
	struct ibv_send_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = off <= ds->sq_inline ? IBV_SEND_INLINE : 0}, *bad;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	if (ibv_post_send(d->qp->id->qp, &wr, &bad)) {
		ds->sfree[ds->nsfree++] = slot;
		return fail(errno ? errno : EIO);
	}
	return len;
}

ssize_t ds_send(struct dsock *ds, const struct iovec *iov, int iovcnt, const struct sockaddr *dst, socklen_t dstlen,
		int flags, int nonblock)
{
	if (dst && (dstlen < addr_len(dst->sa_family) || dst->sa_family != ds->domain))
		return fail(dst->sa_family != ds->domain ? EAFNOSUPPORT : EINVAL);
	pthread_mutex_lock(&ds->mu);
	ssize_t ret = send_locked(ds, iov, iovcnt, dst, nonblock);
	pthread_mutex_unlock(&ds->mu);
	return ret;
}

/* ---- polling ---- */

short ds_revents(struct dsock *ds, short events)
{
	short r = 0;
	pthread_mutex_lock(&ds->mu);
	progress_now(ds);
	if (queued(ds) || ds->rd_shut)
		r |= POLLIN;
	/* without QPs yet, a datagram goes over UDP */
	if (!ds->wr_shut && (!ds->sized || ds->nsfree))
		r |= POLLOUT;
	pthread_mutex_unlock(&ds->mu);
	return r & events;
}

int ds_wait_fd(struct dsock *ds, int *armed_now)
{
	pthread_mutex_lock(&ds->mu);
	if (arm(ds))
		*armed_now = 1;
	pthread_mutex_unlock(&ds->mu);
	return ds->epfd;
}

/* ---- addresses and options ---- */

int ds_bind(struct dsock *ds, const struct sockaddr *addr, socklen_t len)
{
	pthread_mutex_lock(&ds->mu);
	int ret = bind(ds->udp, addr, len);
	pthread_mutex_unlock(&ds->mu);
	return ret;
}

int ds_connect(struct dsock *ds, const struct sockaddr *addr, socklen_t len)
{
	if (len < sizeof(struct sockaddr_in))
		return fail(EINVAL);
	if (addr->sa_family != ds->domain)
		return fail(EAFNOSUPPORT);
	pthread_mutex_lock(&ds->mu);
	int ret = connect(ds->udp, addr, len);
	if (!ret && (size(ds) || !(ds->conn = dest_of(ds, addr))))
		ret = -1;
	pthread_mutex_unlock(&ds->mu);
	return ret;
}

int ds_shutdown(struct dsock *ds, int how)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return fail(EINVAL);
	pthread_mutex_lock(&ds->mu);
	int ret = 0;
	if (!ds->conn)
		ret = fail(ENOTCONN); /* as UDP's */
	else {
		ds->rd_shut |= how != SHUT_WR;
		ds->wr_shut |= how != SHUT_RD;
	}
	pthread_mutex_unlock(&ds->mu);
	return ret;
}

int ds_getsockname(struct dsock *ds, struct sockaddr *addr, socklen_t *len)
{
	return getsockname(ds->udp, addr, len);
}

int ds_getpeername(struct dsock *ds, struct sockaddr *addr, socklen_t *len)
{
	return getpeername(ds->udp, addr, len);
}

static int int_opt(const void *val, socklen_t len, int *v)
{
	if (!val || len < sizeof(int))
		return fail(EINVAL);
	*v = *(const int *)val;
	return 0;
}

/* ds_setsockopt: SOL_RDMA's queue sizes and SO_SNDBUF/SO_RCVBUF size the QPs made
 * after it (doubled, as the kernel's); every other option, and the buffer sizes too,
 * are the UDP socket's. */
int ds_setsockopt(struct dsock *ds, int level, int name, const void *val, socklen_t len)
{
	int v, ret = 0;
	pthread_mutex_lock(&ds->mu);
	if (level == SOL_RDMA) {
		if (int_opt(val, len, &v) || v < 0 || ds->sized)
			ret = fail(EINVAL);
		else if (name == RDMA_SQSIZE)
			ds->sq_size = v < RS_QP_MAX_SIZE ? v : RS_QP_MAX_SIZE;
		else if (name == RDMA_RQSIZE)
			ds->rq_size = v < RS_QP_MAX_SIZE ? v : RS_QP_MAX_SIZE;
		else if (name == RDMA_INLINE)
			ds->sq_inline = v < RS_QP_MAX_SIZE ? v : RS_QP_MAX_SIZE;
		else
			ret = fail(ENOTSUP);
	} else if ((ret = setsockopt(ds->udp, level, name, val, len)) == 0 && level == SOL_SOCKET &&
		   (name == SO_SNDBUF || name == SO_RCVBUF) && !ds->sized && int_opt(val, len, &v) == 0) {
		uint32_t b = (v < RS_SNDLOWAT ? RS_SNDLOWAT : (uint32_t)v) << 1;
		if (name == SO_SNDBUF)
			ds->sbuf_size = b;
		else
			ds->rbuf_size = b;
	}
	pthread_mutex_unlock(&ds->mu);
	return ret;
}

int ds_getsockopt(struct dsock *ds, int level, int name, void *val, socklen_t *len)
{
	if (!val || !len)
		return fail(EINVAL);
	int v;
	pthread_mutex_lock(&ds->mu);
	if (level == SOL_RDMA && name == RDMA_SQSIZE)
		v = ds->sq_size;
	else if (level == SOL_RDMA && name == RDMA_RQSIZE)
		v = ds->rq_size;
	else if (level == SOL_RDMA && name == RDMA_INLINE)
		v = ds->sq_inline;
	else if (level == SOL_SOCKET && name == SO_SNDBUF)
		v = ds->sbuf_size;
	else if (level == SOL_SOCKET && name == SO_RCVBUF)
		v = ds->rbuf_size;
	else {
		pthread_mutex_unlock(&ds->mu);
		return level == SOL_RDMA ? fail(ENOTSUP) : getsockopt(ds->udp, level, name, val, len);
	}
	pthread_mutex_unlock(&ds->mu);
	if (*len < sizeof(int))
		return fail(EINVAL);
	*(int *)val = v;
	*len = sizeof(int);
	return 0;
}
