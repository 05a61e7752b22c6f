/*
 * rsockets (rsocket(7)) on rocelab's librdmacm: a byte stream (SOCK_STREAM) over an RC
 * QP, with rdma-core's wire protocol so that a rocelab host and an rdma-core host (rxe)
 * talk to each other (docs/rdmacm.md, "rsockets"):
 *
 *  - The connection's private data (REQ and REP) is struct rs_conn_data: version 1,
 *    flags (IOMAP; NET on a big-endian host), the receive credits (the receive queue's
 *    size), the scale-encoded number of iomap slots, and two big-endian SGEs: the
 *    sender's target SGL (an array of RS_SGL_SIZE struct rs_sge the peer writes to,
 *    followed by the iomap slots) and the first half of its receive buffer.
 *  - Data goes by RDMA WRITE WITH IMMEDIATE into the half of the peer's receive
 *    buffer the peer last granted; the big-endian immediate is op << 29 | length.
 *  - The receiver grants the next half of its ring, and credits, by an RDMA WRITE
 *    WITH IMMEDIATE of one struct rs_sge (in the receiver's byte order unless the
 *    flags differ) into the sender's target SGL, op SGL, data = the sequence number
 *    up to which the sender may send; credits alone go as a zero-length write.
 *  - Control messages (op CTRL: disconnect, shutdown) are zero-length writes; riomap
 *    announces a registered buffer by writing struct rs_iomap into the peer's iomap
 *    slot (op IOMAP_SGL, data = the slot), and riowrite writes it by plain RDMA WRITE.
 *
 * An rsocket's descriptor is its synchronous rdma_cm identifier's event channel fd
 * (an eventfd, unique while the rsocket lives), as rdma-core's. Datagram rsockets
 * (SOCK_DGRAM) are rsocket_dgram.c's: each entry point hands them over.
 */
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "rsocket_dgram.h"

/* rdma-core's constants: the protocol depends on RS_SGL_SIZE and the op values. */
#define RS_OLAP_START_SIZE 2048
#define RS_MAX_TRANSFER 65536
#define RS_SNDLOWAT 2048
#define RS_QP_MIN_SIZE 16
#define RS_QP_MAX_SIZE 0xFFFE
#define RS_QP_CTRL_SIZE 4
#define RS_SGL_SIZE 2
#define RS_CONN_FLAG_NET (1 << 0)
#define RS_CONN_FLAG_IOMAP (1 << 1)

enum { RS_OP_DATA, RS_OP_RSVD_DATA_MORE, RS_OP_WRITE, RS_OP_RSVD_DRA_MORE, RS_OP_SGL, RS_OP_RSVD, RS_OP_IOMAP_SGL, RS_OP_CTRL };
enum { RS_CTRL_DISCONNECT, RS_CTRL_KEEPALIVE, RS_CTRL_SHUTDOWN };

#define rs_msg(op, data) (((uint32_t)(op) << 29) | (uint32_t)(data))
#define rs_msg_op(m) ((m) >> 29)
#define rs_msg_data(m) ((m) & 0x1FFFFFFF)
#define RS_WR_RECV (1ULL << 63)

struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits; /* big-endian */
	uint8_t reserved[3];
	uint8_t target_iomap_size;
	struct rs_sge target_sgl; /* big-endian fields */
	struct rs_sge data_buf;
};

enum {
	RS_LISTENING = 1 << 0,
	RS_CONNECTED = 1 << 1,
	RS_READABLE = 1 << 2,
	RS_WRITABLE = 1 << 3,
	RS_DISCONNECTED = 1 << 4,
	RS_ERROR = 1 << 5,
};

struct rs_iomr {
	struct ibv_mr *mr;
	off_t offset;
	int slot;    /* the peer's iomap slot, -1 for a buffer only we read */
	int pending; /* not yet written to the peer's slot */
	struct rs_iomr *next;
};

struct rsock {
	int index;
	int domain;
	struct dsock *ds; /* a datagram rsocket's, which has nothing else here */
	pthread_mutex_t mu;
	struct rdma_cm_id *id;
	int state, err, fd_flags;
	int swap; /* the peer's byte order differs */

	/* options, fixed at connection */
	uint16_t sq_size, rq_size, iomap_size;
	uint32_t sq_inline, sbuf_size, rbuf_size;
	int reuseaddr, keepalive, nodelay, oobinline;
	struct linger linger;

	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	int armed;

	uint8_t *sbuf; /* the send ring, and RS_QP_CTRL_SIZE control slots after it */
	struct ibv_mr *smr;
	uint32_t sbuf_off, sbuf_avail, sqe_avail;
	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t rbuf_off, rbuf_free_off, rbuf_avail;
	struct rs_sge *target; /* RS_SGL_SIZE SGEs the peer grants, then its iomaps */
	struct ibv_mr *tmr;
	/* the granted SGEs, copied from target once their SGL message completes: the
	 * peer's RDMA WRITE may be landing in target while we read it */
	struct rs_sge sgl[RS_SGL_SIZE];
	int target_sge, sgl_in;
	struct rs_iomap *peer_iomaps; /* the peer's mappings, copied from target likewise */
	struct rs_sge remote_sgl, remote_iomap;
	int remote_sge;
	uint16_t sseq_no, sseq_comp, rseq_no, rseq_comp;
	uint32_t ctrl_seqno, ctrl_max;
	struct {
		uint32_t op, len;
	} *rmsg;
	uint32_t rmsg_head, rmsg_tail;
	struct rs_iomr *iomaps;
};

/* ---- the descriptor table ---- */

static pthread_mutex_t tbl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **tbl;
static int tbl_len;

static int fail(int err)
{
	errno = err;
	return -1;
}

static struct rsock *lookup(int fd)
{
	struct rsock *rs = NULL;
	pthread_mutex_lock(&tbl_mu);
	if (fd >= 0 && fd < tbl_len)
		rs = tbl[fd];
	pthread_mutex_unlock(&tbl_mu);
	return rs;
}

static int insert(struct rsock *rs, int fd)
{
	pthread_mutex_lock(&tbl_mu);
	if (fd >= tbl_len) {
		int n = fd + 64;
		struct rsock **t = realloc(tbl, n * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&tbl_mu);
			return fail(ENOMEM);
		}
		memset(t + tbl_len, 0, (n - tbl_len) * sizeof(*t));
		tbl = t;
		tbl_len = n;
	}
	tbl[fd] = rs;
	rs->index = fd;
	pthread_mutex_unlock(&tbl_mu);
	return fd;
}

static void remove_fd(int fd)
{
	pthread_mutex_lock(&tbl_mu);
	if (fd >= 0 && fd < tbl_len)
		tbl[fd] = NULL;
	pthread_mutex_unlock(&tbl_mu);
}

/* rs_value_to_scale and back: how rdma-core encodes the iomap size in 8 bits. */
static uint8_t to_scale(int v)
{
	return v <= 128 ? v : 128 | (v >> 8);
}

static int from_scale(int v)
{
	return v <= 128 ? v : (v & ~128) << 8;
}

static struct rsock *rs_alloc(const struct rsock *parent, int domain)
{
	struct rsock *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->mu, NULL);
	rs->index = -1;
	rs->domain = domain;
	if (parent) {
		rs->sq_size = parent->sq_size;
		rs->rq_size = parent->rq_size;
		rs->sq_inline = parent->sq_inline;
		rs->sbuf_size = parent->sbuf_size;
		rs->rbuf_size = parent->rbuf_size;
		rs->iomap_size = parent->iomap_size;
		rs->keepalive = parent->keepalive;
		rs->nodelay = parent->nodelay;
		rs->oobinline = parent->oobinline;
		/* O_NONBLOCK is not inherited, as accept(2)'s */
	} else {
		/* rdma-core's defaults */
		rs->sq_size = rs->rq_size = 384;
		rs->sq_inline = 64;
		rs->sbuf_size = rs->rbuf_size = 1 << 17;
	}
	return rs;
}

static void rs_free(struct rsock *rs)
{
	if (rs->ds) {
		remove_fd(rs->index); /* before its descriptor closes and can be reused */
		ds_close(rs->ds);
		pthread_mutex_destroy(&rs->mu);
		free(rs);
		return;
	}
	while (rs->iomaps) {
		struct rs_iomr *m = rs->iomaps;
		rs->iomaps = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id); /* and the CQ and channel, set as the id's */
	else {
		if (rs->cq)
			ibv_destroy_cq(rs->cq);
		if (rs->ch)
			ibv_destroy_comp_channel(rs->ch);
	}
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->tmr)
		ibv_dereg_mr(rs->tmr);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->target);
	free(rs->peer_iomaps);
	free(rs->rmsg);
	if (rs->index >= 0)
		remove_fd(rs->index);
	if (rs->id)
		rdma_destroy_id(rs->id);
	pthread_mutex_destroy(&rs->mu);
	free(rs);
}

/* ---- the endpoint: CQ, QP, buffers ---- */

static int post_recv(struct rsock *rs)
{
	struct ibv_recv_wr wr = {.wr_id = RS_WR_RECV}, *bad;
	return ibv_post_recv(rs->id->qp, &wr, &bad) ? fail(errno ? errno : EIO) : 0;
}

static int create_ep(struct rsock *rs)
{
	struct rdma_cm_id *id = rs->id;
	if (rs->sq_size < RS_QP_MIN_SIZE)
		rs->sq_size = RS_QP_MIN_SIZE;
	if (rs->rq_size < RS_QP_MIN_SIZE)
		rs->rq_size = RS_QP_MIN_SIZE;
	/* the SGL updates and iomap entries go inline */
	if (rs->sq_inline < sizeof(struct rs_iomap))
		rs->sq_inline = sizeof(struct rs_iomap);
	if (rs->sbuf_size < RS_SNDLOWAT * 2)
		rs->sbuf_size = RS_SNDLOWAT * 2;
	if (rs->rbuf_size < RS_SNDLOWAT * 2)
		rs->rbuf_size = RS_SNDLOWAT * 2;

	if (!(rs->ch = ibv_create_comp_channel(id->verbs)))
		return -1;
	/* waits poll the fd, so reads never block (ibv_get_cq_event: EAGAIN) */
	if (fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK) < 0)
		return -1;
	if (!(rs->cq = ibv_create_cq(id->verbs, rs->sq_size + rs->rq_size, rs, rs->ch, 0)))
		return -1;
	struct ibv_qp_init_attr a = {
		.qp_context = rs,
		.send_cq = rs->cq,
		.recv_cq = rs->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = rs->sq_size, .max_recv_wr = rs->rq_size, .max_send_sge = 2,
			.max_recv_sge = 1, .max_inline_data = rs->sq_inline},
	};
	if (rdma_create_qp(id, NULL, &a))
		return -1;
	id->recv_cq = id->send_cq = rs->cq;
	id->recv_cq_channel = id->send_cq_channel = rs->ch;
	rs->sq_inline = a.cap.max_inline_data;

	if (!(rs->rmsg = calloc(rs->rq_size + 1, sizeof(*rs->rmsg))))
		return fail(ENOMEM);
	size_t tlen = sizeof(struct rs_sge) * RS_SGL_SIZE + sizeof(struct rs_iomap) * rs->iomap_size;
	if (!(rs->sbuf = malloc(rs->sbuf_size)) || !(rs->rbuf = malloc(rs->rbuf_size)) ||
	    !(rs->target = calloc(1, tlen)) || !(rs->peer_iomaps = calloc(rs->iomap_size + 1, sizeof(struct rs_iomap))))
		return fail(ENOMEM);
	if (!(rs->smr = ibv_reg_mr(id->pd, rs->sbuf, rs->sbuf_size, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(rs->rmr = ibv_reg_mr(id->pd, rs->rbuf, rs->rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) ||
	    !(rs->tmr = ibv_reg_mr(id->pd, rs->target, tlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		return -1;
	rs->sbuf_avail = rs->sbuf_size;
	/* the first half of the ring goes in the private data */
	rs->rbuf_free_off = rs->rbuf_avail = rs->rbuf_size >> 1;
	rs->ctrl_max = RS_QP_CTRL_SIZE;
	rs->sqe_avail = rs->sq_size - rs->ctrl_max;
	rs->rseq_comp = rs->rq_size >> 1;
	for (int i = 0; i < rs->rq_size; i++)
		if (post_recv(rs))
			return -1;
	return 0;
}

static void format_conn(const struct rsock *rs, struct rs_conn_data *c)
{
	memset(c, 0, sizeof(*c));
	c->version = 1;
	c->flags = RS_CONN_FLAG_IOMAP | (__BYTE_ORDER == __BIG_ENDIAN ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16(rs->rq_size);
	c->target_iomap_size = to_scale(rs->iomap_size);
	c->target_sgl.addr = htobe64((uintptr_t)rs->target);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(rs->tmr->rkey);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.length = htobe32(rs->rbuf_size >> 1);
	c->data_buf.key = htobe32(rs->rmr->rkey);
}

/* save_conn takes the peer's rs_conn_data, len bytes of private data. */
static int save_conn(struct rsock *rs, const void *pd, size_t len)
{
	struct rs_conn_data c;
	if (!pd || len < sizeof(c))
		return fail(EPROTO);
	memcpy(&c, pd, sizeof(c));
	if (c.version != 1)
		return fail(ENOTSUP);
	rs->remote_sgl.addr = be64toh(c.target_sgl.addr);
	rs->remote_sgl.length = be32toh(c.target_sgl.length);
	rs->remote_sgl.key = be32toh(c.target_sgl.key);
	if (!rs->remote_sgl.length)
		return fail(EPROTO);
	/* rdma-core starts granting at the peer's second SGE: the first is in here */
	rs->remote_sge = 1 % rs->remote_sgl.length;
	rs->swap = !!(c.flags & RS_CONN_FLAG_NET) != (__BYTE_ORDER == __BIG_ENDIAN);
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(struct rs_sge) * rs->remote_sgl.length;
		rs->remote_iomap.length = from_scale(c.target_iomap_size);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	rs->sgl[0].addr = be64toh(c.data_buf.addr);
	rs->sgl[0].length = be32toh(c.data_buf.length);
	rs->sgl[0].key = be32toh(c.data_buf.key);
	rs->sgl_in = 1; /* where the peer writes its next grant */
	rs->sseq_comp = be16toh(c.credits);
	rs->state = RS_CONNECTED | RS_READABLE | RS_WRITABLE;
	return 0;
}

/* ---- posting ---- */

static int post_write(struct rsock *rs, struct ibv_sge *sgl, int n, uint32_t msg, int imm, int flags, uint64_t addr,
		      uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = msg,
		.sg_list = sgl,
		.num_sge = n,
		.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
		.send_flags = flags,
		.imm_data = imm ? htobe32(msg) : 0,
		.wr = {.rdma = {.remote_addr = addr, .rkey = rkey}},
	}, *bad;
	return ibv_post_send(rs->id->qp, &wr, &bad) ? fail(errno ? errno : EIO) : 0;
}

static int post_msg(struct rsock *rs, uint32_t msg)
{
	return post_write(rs, NULL, 0, msg, 1, 0, 0, 0);
}

static int ctrl_avail(const struct rsock *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max;
}

/* send_credits grants the peer the sequence numbers up to rseq_no + rq_size and, when
 * half the ring is free, that half. */
static void send_credits(struct rsock *rs)
{
	rs->ctrl_seqno++;
	rs->rseq_comp = rs->rseq_no + (rs->rq_size >> 1);
	uint32_t msg = rs_msg(RS_OP_SGL, (uint16_t)(rs->rseq_no + rs->rq_size));
	if (rs->rbuf_avail < (rs->rbuf_size >> 1)) {
		post_msg(rs, msg);
		return;
	}
	struct rs_sge sge = {(uintptr_t)&rs->rbuf[rs->rbuf_free_off], rs->rmr->rkey, rs->rbuf_size >> 1};
	if (rs->swap) {
		sge.addr = bswap_64(sge.addr);
		sge.key = bswap_32(sge.key);
		sge.length = bswap_32(sge.length);
	}
	struct ibv_sge s = {.addr = (uintptr_t)&sge, .length = sizeof(sge)};
	post_write(rs, &s, 1, msg, 1, IBV_SEND_INLINE,
		   rs->remote_sgl.addr + rs->remote_sge * sizeof(struct rs_sge), rs->remote_sgl.key);
	rs->rbuf_avail -= rs->rbuf_size >> 1;
	rs->rbuf_free_off += rs->rbuf_size >> 1;
	if (rs->rbuf_free_off >= rs->rbuf_size)
		rs->rbuf_free_off = 0;
	if (++rs->remote_sge == (int)rs->remote_sgl.length)
		rs->remote_sge = 0;
}

static void update_credits(struct rsock *rs)
{
	if ((rs->rbuf_avail >= (rs->rbuf_size >> 1) || (int16_t)(rs->rseq_no - rs->rseq_comp) >= 0) &&
	    ctrl_avail(rs) && (rs->state & RS_CONNECTED))
		send_credits(rs);
}

/* ---- completions ---- */

static void set_error(struct rsock *rs, int err)
{
	if (rs->state & RS_CONNECTED) {
		rs->state = RS_ERROR;
		rs->err = err;
	}
}

static void poll_cq(struct rsock *rs)
{
	struct ibv_wc wc;
	int n, reposts = 0;
	while ((n = ibv_poll_cq(rs->cq, 1, &wc)) > 0) {
		if (wc.wr_id & RS_WR_RECV) {
			if (wc.status != IBV_WC_SUCCESS) {
				/* flushed: the peer went away without telling us */
				if (rs->state & RS_CONNECTED) {
					rs->state = RS_DISCONNECTED;
					rs->err = ECONNRESET;
				}
				continue;
			}
			reposts++;
			uint32_t msg = (wc.wc_flags & IBV_WC_WITH_IMM) ? be32toh(wc.imm_data) : 0;
			switch (rs_msg_op(msg)) {
			case RS_OP_SGL:
				rs->sseq_comp = (uint16_t)rs_msg_data(msg);
				/* 16 bytes written: a grant, in the next SGE of target */
				if (wc.byte_len == sizeof(struct rs_sge)) {
					rs->sgl[rs->sgl_in] = rs->target[rs->sgl_in];
					rs->sgl_in = (rs->sgl_in + 1) % RS_SGL_SIZE;
				}
				break;
			case RS_OP_IOMAP_SGL: /* the peer wrote one of our iomap slots */
				if (rs_msg_data(msg) < rs->iomap_size)
					rs->peer_iomaps[rs_msg_data(msg)] =
						((struct rs_iomap *)(rs->target + RS_SGL_SIZE))[rs_msg_data(msg)];
				break;
			case RS_OP_WRITE:
				break;
			case RS_OP_CTRL:
				if (rs_msg_data(msg) == RS_CTRL_DISCONNECT)
					rs->state = RS_DISCONNECTED;
				else if (rs_msg_data(msg) == RS_CTRL_SHUTDOWN) {
					if (rs->state & RS_WRITABLE)
						rs->state &= ~RS_READABLE;
					else
						rs->state = RS_DISCONNECTED;
				}
				break;
			default:
				rs->rmsg[rs->rmsg_tail].op = rs_msg_op(msg);
				rs->rmsg[rs->rmsg_tail].len = rs_msg_data(msg);
				if (++rs->rmsg_tail == (uint32_t)rs->rq_size + 1)
					rs->rmsg_tail = 0;
			}
		} else {
			uint32_t msg = (uint32_t)wc.wr_id;
			switch (rs_msg_op(msg)) {
			case RS_OP_SGL:
			case RS_OP_CTRL:
				rs->ctrl_max++;
				break;
			case RS_OP_IOMAP_SGL:
				rs->sqe_avail++;
				break;
			default:
				rs->sqe_avail++;
				rs->sbuf_avail += rs_msg_data(msg);
			}
			if (wc.status != IBV_WC_SUCCESS)
				set_error(rs, EIO);
		}
	}
	if (n < 0)
		set_error(rs, EIO);
	if (rs->state & RS_CONNECTED)
		while (reposts--)
			if (post_recv(rs))
				set_error(rs, errno);
}

/* take_cq_event consumes the channel's pending event, if any, and acks it. */
static void take_cq_event(struct rsock *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	if (rs->armed && ibv_get_cq_event(rs->ch, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		rs->armed = 0;
	}
}

static int have_rdata(const struct rsock *rs)
{
	return rs->rmsg_head != rs->rmsg_tail;
}

static int can_send(const struct rsock *rs)
{
	return rs->sqe_avail && rs->sbuf_avail >= RS_SNDLOWAT && rs->sseq_no != rs->sseq_comp &&
	       rs->sgl[rs->target_sge].length;
}

static int all_sent(const struct rsock *rs)
{
	return rs->sqe_avail == (uint32_t)rs->sq_size - RS_QP_CTRL_SIZE && rs->ctrl_seqno == rs->ctrl_max - RS_QP_CTRL_SIZE;
}

static int readable_now(const struct rsock *rs)
{
	return have_rdata(rs) || !(rs->state & RS_READABLE);
}

static int writable_now(const struct rsock *rs)
{
	return can_send(rs) || !(rs->state & RS_WRITABLE);
}

static int ctrl_now(const struct rsock *rs)
{
	return ctrl_avail(rs) || !(rs->state & RS_CONNECTED);
}

static int sent_now(const struct rsock *rs)
{
	return all_sent(rs) || !(rs->state & RS_CONNECTED);
}

/* progress polls the CQ until ready(rs) or, blocking, sleeps on the completion channel
 * (with rs->mu released) until it is; non-blocking it fails with EAGAIN. */
static int progress(struct rsock *rs, int nonblock, int (*ready)(const struct rsock *))
{
	for (;;) {
		poll_cq(rs);
		update_credits(rs);
		if (ready(rs))
			return 0;
		if (!(rs->state & RS_CONNECTED))
			return fail(rs->err ? rs->err : ECONNRESET);
		if (nonblock)
			return fail(EAGAIN);
		if (!rs->armed) {
			/* poll again after arming: a completion in between makes no event */
			ibv_req_notify_cq(rs->cq, 0);
			rs->armed = 1;
			continue;
		}
		struct pollfd p = {.fd = rs->ch->fd, .events = POLLIN};
		pthread_mutex_unlock(&rs->mu);
		int n = poll(&p, 1, -1);
		pthread_mutex_lock(&rs->mu);
		if (n < 0 && errno != EINTR)
			return -1;
		take_cq_event(rs);
	}
}

static int nonblocking(const struct rsock *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* ---- sockets ---- */

/* dgram_socket makes a datagram rsocket, whose descriptor is its UDP socket's. */
static int dgram_socket(struct rsock *rs)
{
	int fd;
	if (!(rs->ds = ds_open(rs->domain, &fd))) {
		int err = errno;
		pthread_mutex_destroy(&rs->mu);
		free(rs);
		return fail(err);
	}
	if (insert(rs, fd) < 0) {
		rs_free(rs);
		return fail(ENOMEM);
	}
	return fd;
}

int rsocket(int domain, int type, int protocol)
{
	int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if ((domain != AF_INET && domain != AF_INET6) || (kind != SOCK_STREAM && kind != SOCK_DGRAM) ||
	    (kind == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (kind == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return fail(ENOTSUP);
	struct rsock *rs = rs_alloc(NULL, domain);
	if (!rs)
		return fail(ENOMEM);
	if (type & SOCK_NONBLOCK)
		rs->fd_flags = O_NONBLOCK;
	if (kind == SOCK_DGRAM)
		return dgram_socket(rs);
	if (rdma_create_id(NULL, &rs->id, rs, RDMA_PS_TCP)) {
		int err = errno;
		rs_free(rs);
		return fail(err);
	}
	rs->id->route.addr.src_addr.sa_family = domain;
	if (insert(rs, rs->id->channel->fd) < 0) {
		rs_free(rs);
		return fail(ENOMEM);
	}
	return rs->index;
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (!addr || addrlen < sizeof(struct sockaddr_in))
		return fail(EINVAL);
	if (rs->ds)
		return ds_bind(rs->ds, addr, addrlen);
	return rdma_bind_addr(rs->id, (struct sockaddr *)addr);
}

int rlisten(int socket, int backlog)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return fail(EOPNOTSUPP); /* as listen(2) on a UDP socket */
	if (rs->state & RS_LISTENING)
		return 0;
	if (rs->state)
		return fail(EINVAL);
	if (rdma_listen(rs->id, backlog))
		return -1;
	rs->state = RS_LISTENING;
	return 0;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *l = lookup(socket);
	if (!l)
		return fail(EBADF);
	if (l->ds)
		return fail(EOPNOTSUPP);
	if (!(l->state & RS_LISTENING))
		return fail(EINVAL);
	for (;;) {
		struct rdma_cm_id *cid;
		/* the channel's fd stays blocking, for the synchronous calls: a non-blocking
		 * listener looks before it reads */
		struct pollfd p = {.fd = l->id->channel->fd, .events = POLLIN};
		if ((l->fd_flags & O_NONBLOCK) && poll(&p, 1, 0) == 0)
			return fail(EAGAIN);
		pthread_mutex_lock(&l->mu);
		int ret = rdma_get_request(l->id, &cid);
		pthread_mutex_unlock(&l->mu);
		if (ret)
			return -1; /* EAGAIN on a non-blocking listener without a request */
		struct rsock *rs = rs_alloc(l, l->domain);
		if (!rs) {
			rdma_reject(cid, NULL, 0);
			rdma_destroy_id(cid);
			return fail(ENOMEM);
		}
		rs->id = cid;
		cid->context = rs;
		struct rdma_conn_param param = cid->event->param.conn;
		struct rs_conn_data resp;
		if (insert(rs, cid->channel->fd) < 0 || create_ep(rs) ||
		    save_conn(rs, param.private_data, param.private_data_len)) {
			/* a request that is no rsocket's, or no room: refused, wait for the next */
			rdma_reject(cid, NULL, 0);
			rs_free(rs);
			continue;
		}
		format_conn(rs, &resp);
		param.private_data = &resp;
		param.private_data_len = sizeof(resp);
		param.rnr_retry_count = 7;
		if (rdma_accept(cid, &param)) {
			rs_free(rs);
			continue;
		}
		if (addr && addrlen)
			rgetpeername(rs->index, addr, addrlen);
		return rs->index;
	}
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (!addr || addrlen < sizeof(struct sockaddr_in))
		return fail(EINVAL);
	if (rs->ds)
		return ds_connect(rs->ds, addr, addrlen);
	if (rs->state & RS_CONNECTED)
		return fail(EISCONN);
	if (rs->state)
		return fail(EINVAL);
	/* The lab resolves and connects in milliseconds: a non-blocking rconnect
	 * completes too, which connect(2) allows. */
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, 2000) || rdma_resolve_route(rs->id, 2000))
		return errno == ETIMEDOUT ? fail(ENETUNREACH) : -1;
	pthread_mutex_lock(&rs->mu);
	int ret = create_ep(rs);
	if (!ret) {
		struct rs_conn_data req;
		format_conn(rs, &req);
		struct rdma_conn_param param = {.private_data = &req,
						.private_data_len = sizeof(req),
						.flow_control = 1,
						.retry_count = 7,
						.rnr_retry_count = 7,
						.responder_resources = 1,
						.initiator_depth = 1};
		ret = rdma_connect(rs->id, &param);
		if (!ret)
			ret = save_conn(rs, rs->id->event->param.conn.private_data,
					rs->id->event->param.conn.private_data_len);
	}
	if (ret) {
		rs->err = errno;
		rs->state = RS_ERROR;
	}
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* ---- data ---- */

static ssize_t recv_locked(struct rsock *rs, void *buf, size_t len, int flags)
{
	uint8_t *out = buf;
	size_t left = len;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return fail(ENOTCONN);
	if (!len)
		return 0;
	do {
		if (!have_rdata(rs) && progress(rs, nonblocking(rs, flags), readable_now) && errno == EAGAIN) {
			if (left != len)
				break;
			return -1;
		}
		if (!have_rdata(rs)) {
			/* end of stream, or the connection's failure */
			if (left == len && (rs->state & RS_ERROR))
				return fail(rs->err);
			break;
		}
		if (flags & MSG_PEEK) {
			/* copy what the queued messages hold, consuming nothing */
			uint32_t h = rs->rmsg_head, off = rs->rbuf_off;
			while (left && h != rs->rmsg_tail) {
				uint32_t n = rs->rmsg[h].len < left ? rs->rmsg[h].len : left;
				for (uint32_t i = 0; i < n; i++, off = (off + 1) % rs->rbuf_size)
					*out++ = rs->rbuf[off];
				left -= n;
				if (++h == (uint32_t)rs->rq_size + 1)
					h = 0;
			}
			break;
		}
		while (left && have_rdata(rs)) {
			uint32_t n = rs->rmsg[rs->rmsg_head].len;
			if (left < n) {
				n = left;
				rs->rmsg[rs->rmsg_head].len -= n;
			} else {
				rs->rseq_no++;
				if (++rs->rmsg_head == (uint32_t)rs->rq_size + 1)
					rs->rmsg_head = 0;
			}
			left -= n;
			while (n) {
				uint32_t chunk = rs->rbuf_size - rs->rbuf_off;
				if (chunk > n)
					chunk = n;
				memcpy(out, &rs->rbuf[rs->rbuf_off], chunk);
				out += chunk;
				n -= chunk;
				rs->rbuf_avail += chunk;
				rs->rbuf_off += chunk;
				if (rs->rbuf_off == rs->rbuf_size)
					rs->rbuf_off = 0;
			}
		}
		update_credits(rs);
	} while (left && (flags & MSG_WAITALL) && (rs->state & RS_READABLE));
	return len - left;
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds) {
		struct iovec v = {.iov_base = buf, .iov_len = len};
		return ds_recv(rs->ds, &v, 1, flags, nonblocking(rs, flags), NULL, NULL, NULL);
	}
	pthread_mutex_lock(&rs->mu);
	ssize_t ret = recv_locked(rs, buf, len, flags);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* copy_out puts len bytes of buf in the send ring and describes them in sgl (two SGEs
 * when they wrap); returns the number of SGEs. */
static int copy_out(struct rsock *rs, const void *buf, uint32_t len, struct ibv_sge *sgl)
{
	uint32_t first = rs->sbuf_size - rs->sbuf_off;
	if (first > len)
		first = len;
	memcpy(rs->sbuf + rs->sbuf_off, buf, first);
	sgl[0] = (struct ibv_sge){(uintptr_t)rs->sbuf + rs->sbuf_off, first, rs->smr->lkey};
	rs->sbuf_off = (rs->sbuf_off + first) % rs->sbuf_size;
	if (first == len)
		return 1;
	memcpy(rs->sbuf, (const uint8_t *)buf + first, len - first);
	sgl[1] = (struct ibv_sge){(uintptr_t)rs->sbuf, len - first, rs->smr->lkey};
	rs->sbuf_off = len - first;
	return 2;
}

/* send_chunk writes n bytes (inline or through the send ring) to addr/rkey. */
static int send_chunk(struct rsock *rs, const void *buf, uint32_t n, uint32_t msg, int imm, uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sgl[2];
	int nsge, flags = 0;
	if (n <= rs->sq_inline) {
		sgl[0] = (struct ibv_sge){(uintptr_t)buf, n, 0};
		nsge = 1;
		flags = IBV_SEND_INLINE;
	} else
		nsge = copy_out(rs, buf, n, sgl);
	rs->sqe_avail--;
	rs->sbuf_avail -= n;
	return post_write(rs, sgl, nsge, msg, imm, flags, addr, rkey);
}

static int send_iomaps(struct rsock *rs, int flags);

/* wait_writable waits until the peer's credits and room allow a write: EAGAIN when it
 * would block, ECONNRESET once the stream cannot be written (rdma-core's answer). */
static int wait_writable(struct rsock *rs, int flags)
{
	int ret = progress(rs, nonblocking(rs, flags), writable_now);
	if (ret && errno == EAGAIN)
		return -1;
	if (!(rs->state & RS_WRITABLE))
		return fail(rs->state & RS_ERROR ? rs->err : ECONNRESET);
	return ret;
}

static ssize_t send_locked(struct rsock *rs, const void *buf, size_t len, int flags)
{
	const uint8_t *in = buf;
	size_t left = len;
	uint32_t olen = RS_OLAP_START_SIZE;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return fail(ENOTCONN);
	if (send_iomaps(rs, flags))
		return -1;
	while (left) {
		if (!can_send(rs) && wait_writable(rs, flags)) {
			if (left != len)
				break;
			return -1;
		}
		/* chunks grow from 2 KiB to 64 KiB, so that small writes go out at once */
		uint32_t n = left;
		if (olen < left) {
			n = olen;
			if (olen < RS_MAX_TRANSFER)
				olen <<= 1;
		}
		if (n > rs->sbuf_avail)
			n = rs->sbuf_avail;
		struct rs_sge *t = &rs->sgl[rs->target_sge];
		if (n > t->length)
			n = t->length;
		uint64_t addr = t->addr;
		t->addr += n;
		t->length -= n;
		if (!t->length && ++rs->target_sge == RS_SGL_SIZE)
			rs->target_sge = 0;
		rs->sseq_no++;
		if (send_chunk(rs, in, n, rs_msg(RS_OP_DATA, n), 1, addr, t->key)) {
			set_error(rs, errno);
			if (left != len)
				break;
			return -1;
		}
		in += n;
		left -= n;
	}
	return len - left;
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds) {
		struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
		return ds_send(rs->ds, &v, 1, NULL, 0, flags, nonblocking(rs, flags));
	}
	pthread_mutex_lock(&rs->mu);
	ssize_t ret = send_locked(rs, buf, len, flags);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct rsock *rs = lookup(socket);
	if (rs && rs->ds) {
		struct iovec v = {.iov_base = buf, .iov_len = len};
		return ds_recv(rs->ds, &v, 1, flags, nonblocking(rs, flags), src_addr, addrlen, NULL);
	}
	ssize_t ret = rrecv(socket, buf, len, flags);
	if (ret > 0 && src_addr)
		rgetpeername(socket, src_addr, addrlen);
	return ret;
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct rsock *rs = lookup(socket);
	if (rs && rs->ds) {
		struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
		return ds_send(rs->ds, &v, 1, dest_addr, addrlen, flags, nonblocking(rs, flags));
	}
	if (rs && dest_addr && (rs->state & RS_CONNECTED))
		return fail(EISCONN); /* a stream's destination is its peer */
	return rsend(socket, buf, len, flags);
}

static ssize_t iov_recv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_recv(rs->ds, iov, iovcnt, flags, nonblocking(rs, flags), NULL, NULL, NULL);
	ssize_t total = 0;
	pthread_mutex_lock(&rs->mu);
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		/* only the first may wait: later ones take what is there */
		ssize_t n = recv_locked(rs, iov[i].iov_base, iov[i].iov_len, total ? flags | MSG_DONTWAIT : flags);
		if (n < 0) {
			if (!total)
				total = -1;
			break;
		}
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	pthread_mutex_unlock(&rs->mu);
	return total;
}

static ssize_t iov_send(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_send(rs->ds, iov, iovcnt, NULL, 0, flags, nonblocking(rs, flags));
	ssize_t total = 0;
	pthread_mutex_lock(&rs->mu);
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ssize_t n = send_locked(rs, iov[i].iov_base, iov[i].iov_len, flags);
		if (n < 0) {
			if (!total)
				total = -1;
			break;
		}
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	pthread_mutex_unlock(&rs->mu);
	return total;
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (msg->msg_control && msg->msg_controllen)
		return fail(ENOTSUP);
	msg->msg_flags = 0;
	struct rsock *rs = lookup(socket);
	if (rs && rs->ds)
		return ds_recv(rs->ds, msg->msg_iov, msg->msg_iovlen, flags, nonblocking(rs, flags), msg->msg_name,
			       msg->msg_name ? &msg->msg_namelen : NULL, &msg->msg_flags);
	return iov_recv(socket, msg->msg_iov, msg->msg_iovlen, flags);
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (msg->msg_control && msg->msg_controllen)
		return fail(ENOTSUP);
	struct rsock *rs = lookup(socket);
	if (rs && rs->ds)
		return ds_send(rs->ds, msg->msg_iov, msg->msg_iovlen, msg->msg_name, msg->msg_namelen, flags,
			       nonblocking(rs, flags));
	return iov_send(socket, msg->msg_iov, msg->msg_iovlen, flags);
}

ssize_t rread(int socket, void *buf, size_t count) { return rrecv(socket, buf, count, 0); }
ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt) { return iov_recv(socket, iov, iovcnt, 0); }
ssize_t rwrite(int socket, const void *buf, size_t count) { return rsend(socket, buf, count, 0); }
ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt) { return iov_send(socket, iov, iovcnt, 0); }

/* ---- shutdown and close ---- */

static int shutdown_locked(struct rsock *rs, int how)
{
	if (!(rs->state & RS_CONNECTED))
		return (rs->state & (RS_DISCONNECTED | RS_ERROR)) ? 0 : fail(ENOTCONN);
	int ctrl;
	if (how == SHUT_RDWR) {
		rs->state &= ~(RS_READABLE | RS_WRITABLE);
		ctrl = RS_CTRL_DISCONNECT;
	} else if (how == SHUT_WR) {
		rs->state &= ~RS_WRITABLE;
		ctrl = (rs->state & RS_READABLE) ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
	} else if (how == SHUT_RD) {
		rs->state &= ~RS_READABLE;
		if (rs->state & RS_WRITABLE)
			return 0;
		ctrl = RS_CTRL_DISCONNECT;
	} else
		return fail(EINVAL);
	/* the peer learns it in order, after the data already posted */
	if (progress(rs, 0, ctrl_now) == 0 && (rs->state & RS_CONNECTED)) {
		rs->ctrl_seqno++;
		post_msg(rs, rs_msg(RS_OP_CTRL, ctrl));
	}
	progress(rs, 0, sent_now);
	if (ctrl == RS_CTRL_DISCONNECT && (rs->state & RS_CONNECTED))
		rs->state = RS_DISCONNECTED;
	return 0;
}

int rshutdown(int socket, int how)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_shutdown(rs->ds, how);
	pthread_mutex_lock(&rs->mu);
	int ret = shutdown_locked(rs, how);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

int rclose(int socket)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	pthread_mutex_lock(&rs->mu);
	if (rs->state & RS_CONNECTED)
		shutdown_locked(rs, SHUT_RDWR);
	pthread_mutex_unlock(&rs->mu);
	rs_free(rs); /* destroying the identifier sends the DREQ */
	return 0;
}

/* ---- polling ---- */

/* revents_now is what an rsocket offers now, after a non-blocking look at its CQ or
 * its event channel. */
static short revents_now(struct rsock *rs, short events)
{
	if (rs->ds)
		return ds_revents(rs->ds, events);
	short r = 0;
	pthread_mutex_lock(&rs->mu);
	if (rs->state & RS_LISTENING) {
		struct pollfd p = {.fd = rs->id->channel->fd, .events = POLLIN};
		if (poll(&p, 1, 0) > 0)
			r = POLLIN;
	} else if (rs->cq) {
		take_cq_event(rs);
		poll_cq(rs);
		update_credits(rs);
		if (readable_now(rs))
			r |= POLLIN;
		if (can_send(rs) && (rs->state & RS_WRITABLE))
			r |= POLLOUT;
		/* the hang-up after the data still queued, as TCP's after a FIN: rdma-core
		 * raises it with the data, and rstream -T a then fails on its last read */
		if ((rs->state & RS_DISCONNECTED) && !have_rdata(rs))
			r |= POLLHUP;
		if (rs->state & RS_ERROR)
			r |= POLLERR;
	} else
		r = POLLOUT | POLLHUP; /* neither connected nor listening, as a TCP socket */
	pthread_mutex_unlock(&rs->mu);
	return r & (events | POLLHUP | POLLERR);
}

/* wait_fd is the descriptor whose readiness may change an rsocket's revents; it arms
 * the CQ so that the next completion makes it readable, setting *armed_now if the CQ
 * was not armed (completions before that made no event: look again before sleeping). */
static int wait_fd(struct rsock *rs, int *armed_now)
{
	if (rs->ds)
		return ds_wait_fd(rs->ds, armed_now);
	int fd = -1;
	pthread_mutex_lock(&rs->mu);
	if (rs->state & RS_LISTENING)
		fd = rs->id->channel->fd;
	else if (rs->cq) {
		if (!rs->armed) {
			ibv_req_notify_cq(rs->cq, 0);
			rs->armed = 1;
			*armed_now = 1;
		}
		fd = rs->ch->fd;
	}
	pthread_mutex_unlock(&rs->mu);
	return fd;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd *w = calloc(nfds ? nfds : 1, sizeof(*w));
	if (!w)
		return fail(ENOMEM);
	int64_t deadline = timeout > 0 ? now_ms() + timeout : 0;
	int ret;
	for (;;) {
		ret = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = lookup(fds[i].fd);
			fds[i].revents = 0;
			if (rs)
				fds[i].revents = revents_now(rs, fds[i].events);
			else if (fds[i].fd >= 0) {
				struct pollfd p = fds[i];
				if (poll(&p, 1, 0) > 0)
					fds[i].revents = p.revents;
			}
			if (fds[i].revents)
				ret++;
		}
		if (ret || timeout == 0)
			break;
		/* sleep only on armed CQs: a look above may have taken an event (and so
		 * disarmed its CQ) without making the rsocket ready */
		int armed_now = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = lookup(fds[i].fd);
			w[i] = (struct pollfd){.fd = rs ? wait_fd(rs, &armed_now) : fds[i].fd,
					       .events = rs ? POLLIN : fds[i].events};
		}
		if (armed_now)
			continue;
		int left = -1;
		if (timeout > 0 && (left = deadline - now_ms()) < 0)
			left = 0;
		int n = poll(w, nfds, left);
		if (n < 0 && errno != EINTR) {
			ret = -1;
			break;
		}
		if (n == 0) {
			ret = 0;
			break;
		}
	}
	free(w);
	return ret;
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *p = calloc(nfds > 0 ? nfds : 1, sizeof(*p));
	if (!p)
		return fail(ENOMEM);
	int n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	int ms = timeout ? timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000 : -1;
	int ret = rpoll(p, n, ms);
	if (ret >= 0) {
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		ret = 0;
		for (int i = 0; i < n; i++) {
			short r = p[i].revents;
			if (readfds && (r & (POLLIN | POLLHUP | POLLERR)) && (p[i].events & POLLIN)) {
				FD_SET(p[i].fd, readfds);
				ret++;
			}
			if (writefds && (r & (POLLOUT | POLLERR)) && (p[i].events & POLLOUT)) {
				FD_SET(p[i].fd, writefds);
				ret++;
			}
			if (exceptfds && (r & POLLPRI) && (p[i].events & POLLPRI)) {
				FD_SET(p[i].fd, exceptfds);
				ret++;
			}
		}
	}
	free(p);
	return ret;
}

/* ---- names and options ---- */

static int copy_addr(const struct sockaddr *a, struct sockaddr *addr, socklen_t *addrlen)
{
	/* a zero length asks only for the length (librspreload does, to learn the family) */
	if (!addrlen || (!addr && *addrlen))
		return fail(EFAULT);
	socklen_t len = a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (addr)
		memcpy(addr, a, *addrlen < len ? *addrlen : len);
	*addrlen = len;
	return 0;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_getpeername(rs->ds, addr, addrlen);
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED)))
		return fail(ENOTCONN);
	return copy_addr(rdma_get_peer_addr(rs->id), addr, addrlen);
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_getsockname(rs->ds, addr, addrlen);
	struct sockaddr_storage any = {.ss_family = rs->domain};
	const struct sockaddr *a = rdma_get_local_addr(rs->id);
	return copy_addr(a->sa_family ? a : (struct sockaddr *)&any, addr, addrlen);
}

static int int_opt(const void *optval, socklen_t optlen, int *v)
{
	if (!optval || optlen < sizeof(int))
		return fail(EINVAL);
	*v = *(const int *)optval;
	return 0;
}

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_setsockopt(rs->ds, level, optname, optval, optlen);
	int v, connected = rs->cq != NULL;
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (!optval || optlen < sizeof(struct linger))
			return fail(EINVAL);
		rs->linger = *(const struct linger *)optval;
		return 0;
	}
	if (int_opt(optval, optlen, &v))
		return -1;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			rs->reuseaddr = !!v;
			return rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &rs->reuseaddr,
					       sizeof(int));
		case SO_RCVBUF:
		case SO_SNDBUF:
			/* as the kernel, the value asked for is doubled; fixed once connected */
			if (connected)
				return 0;
			if (v < RS_SNDLOWAT)
				v = RS_SNDLOWAT;
			if (optname == SO_RCVBUF)
				rs->rbuf_size = (uint32_t)v << 1;
			else
				rs->sbuf_size = (uint32_t)v << 1;
			return 0;
		case SO_KEEPALIVE:
			rs->keepalive = !!v;
			return 0;
		case SO_OOBINLINE:
			rs->oobinline = !!v;
			return 0;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY: /* every write goes out at once anyway */
			rs->nodelay = !!v;
			return 0;
		case TCP_MAXSEG:
			return 0;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			return rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(int));
		break;
	case SOL_RDMA:
		if (connected)
			return fail(EINVAL);
		if (v < 0)
			return fail(EINVAL);
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = v < RS_QP_MAX_SIZE ? v : RS_QP_MAX_SIZE;
			return 0;
		case RDMA_RQSIZE:
			rs->rq_size = v < RS_QP_MAX_SIZE ? v : RS_QP_MAX_SIZE;
			return 0;
		case RDMA_INLINE:
			rs->sq_inline = v < RS_QP_MAX_SIZE ? v : RS_QP_MAX_SIZE;
			return 0;
		case RDMA_IOMAPSIZE:
			rs->iomap_size = from_scale(to_scale(v));
			return 0;
		}
		break;
	}
	return fail(ENOTSUP);
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return ds_getsockopt(rs->ds, level, optname, optval, optlen);
	if (!optval || !optlen)
		return fail(EINVAL);
	int v;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_LINGER:
			if (*optlen < sizeof(struct linger))
				return fail(EINVAL);
			*(struct linger *)optval = rs->linger;
			*optlen = sizeof(struct linger);
			return 0;
		case SO_REUSEADDR:
			v = rs->reuseaddr;
			break;
		case SO_KEEPALIVE:
			v = rs->keepalive;
			break;
		case SO_OOBINLINE:
			v = rs->oobinline;
			break;
		case SO_RCVBUF:
			v = rs->rbuf_size;
			break;
		case SO_SNDBUF:
			v = rs->sbuf_size;
			break;
		case SO_ERROR:
			pthread_mutex_lock(&rs->mu);
			v = rs->err;
			rs->err = 0;
			pthread_mutex_unlock(&rs->mu);
			break;
		case SO_TYPE:
			v = SOCK_STREAM;
			break;
		default:
			return fail(ENOTSUP);
		}
		break;
	case IPPROTO_TCP:
		if (optname == TCP_INFO) {
			/* no TCP underneath: the state, and no retransmissions or window to
			 * report (iperf3 reads them after every interval) */
			struct tcp_info ti = {.tcpi_state = (rs->state & RS_CONNECTED) ? TCP_ESTABLISHED : TCP_CLOSE};
			socklen_t n = *optlen < sizeof(ti) ? *optlen : sizeof(ti);
			memcpy(optval, &ti, n);
			*optlen = n;
			return 0;
		}
		if (optname == TCP_NODELAY)
			v = rs->nodelay;
		else if (optname == TCP_MAXSEG)
			v = RS_SNDLOWAT; /* rdma-core's answer without a path record */
		else
			return fail(ENOTSUP);
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			v = rs->sq_size;
			break;
		case RDMA_RQSIZE:
			v = rs->rq_size;
			break;
		case RDMA_INLINE:
			v = rs->sq_inline;
			break;
		case RDMA_IOMAPSIZE:
			v = rs->iomap_size;
			break;
		default:
			return fail(ENOTSUP);
		}
		break;
	default:
		return fail(ENOTSUP);
	}
	if (*optlen < sizeof(int))
		return fail(EINVAL);
	*(int *)optval = v;
	*optlen = sizeof(int);
	return 0;
}

int rfcntl(int socket, int cmd, ...)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	va_list ap;
	va_start(ap, cmd);
	int arg = cmd == F_SETFL || cmd == F_SETFD ? va_arg(ap, int) : 0;
	va_end(ap);
	switch (cmd) {
	case F_GETFL:
		return rs->fd_flags;
	case F_SETFL:
		rs->fd_flags = arg;
		return 0;
	case F_GETFD:
	case F_SETFD: /* the descriptor is a real one: its close-on-exec flag */
		return fcntl(socket, cmd, arg);
	}
	return fail(ENOTSUP);
}

/* ---- iomaps ---- */

/* send_iomaps writes the mappings riomap queued into the peer's iomap slots. */
static int send_iomaps(struct rsock *rs, int flags)
{
	for (struct rs_iomr *m = rs->iomaps; m; m = m->next) {
		if (!m->pending)
			continue;
		if (!can_send(rs) && wait_writable(rs, flags))
			return -1;
		struct rs_iomap iom = {m->offset, {(uintptr_t)m->mr->addr, m->mr->rkey, m->mr->length}};
		if (rs->swap) {
			iom.offset = bswap_64(iom.offset);
			iom.sge.addr = bswap_64(iom.sge.addr);
			iom.sge.key = bswap_32(iom.sge.key);
			iom.sge.length = bswap_32(iom.sge.length);
		}
		rs->sseq_no++;
		if (send_chunk(rs, &iom, sizeof(iom), rs_msg(RS_OP_IOMAP_SGL, m->slot), 1,
			       rs->remote_iomap.addr + m->slot * sizeof(struct rs_iomap), rs->remote_iomap.key))
			return -1;
		/* the inline entry took no room in the ring, but its completion gives it back */
		rs->sbuf_avail += sizeof(iom);
		m->pending = 0;
	}
	return 0;
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (!rs->cq || (prot & ~(PROT_WRITE | PROT_NONE)))
		return fail(EINVAL);
	pthread_mutex_lock(&rs->mu);
	int slot = -1;
	if (prot & PROT_WRITE) {
		/* the first of the peer's slots that no mapping holds */
		for (int s = 0; s < (int)rs->remote_iomap.length && slot < 0; s++) {
			slot = s;
			for (struct rs_iomr *m = rs->iomaps; m; m = m->next)
				if (m->slot == s)
					slot = -1;
		}
		if (slot < 0) {
			pthread_mutex_unlock(&rs->mu);
			return fail(ENOMEM);
		}
	}
	struct rs_iomr *m = calloc(1, sizeof(*m));
	int access = IBV_ACCESS_LOCAL_WRITE | ((prot & PROT_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0);
	if (!m || !(m->mr = ibv_reg_mr(rs->id->pd, buf, len, access))) {
		int err = m ? errno : ENOMEM;
		free(m);
		pthread_mutex_unlock(&rs->mu);
		return fail(err);
	}
	m->offset = offset == -1 ? (off_t)(uintptr_t)buf : offset;
	m->slot = slot;
	m->pending = slot >= 0;
	m->next = rs->iomaps;
	rs->iomaps = m;
	pthread_mutex_unlock(&rs->mu);
	return m->offset;
}

int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	pthread_mutex_lock(&rs->mu);
	for (struct rs_iomr **p = &rs->iomaps; *p; p = &(*p)->next) {
		struct rs_iomr *m = *p;
		if (m->mr->addr == buf && m->mr->length == len) {
			*p = m->next;
			ibv_dereg_mr(m->mr);
			free(m);
			pthread_mutex_unlock(&rs->mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&rs->mu);
	return fail(EINVAL);
}

/* find_iomap is the peer's mapping that holds offset, among those whose IOMAP_SGL
 * message has completed. */
static struct rs_iomap *find_iomap(struct rsock *rs, off_t offset)
{
	for (int i = 0; i < rs->iomap_size; i++) {
		struct rs_iomap *m = &rs->peer_iomaps[i];
		if (m->sge.length && (uint64_t)offset >= m->offset && (uint64_t)offset < m->offset + m->sge.length)
			return m;
	}
	return NULL;
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return fail(EBADF);
	if (rs->ds)
		return fail(EOPNOTSUPP); /* iomaps are a stream's */
	const uint8_t *in = buf;
	size_t left = count;
	uint32_t olen = RS_OLAP_START_SIZE;
	pthread_mutex_lock(&rs->mu);
	int ret = send_iomaps(rs, flags);
	while (!ret && left) {
		struct rs_iomap *iom = find_iomap(rs, offset);
		if (!iom) {
			if (left == count)
				ret = fail(EINVAL);
			break;
		}
		if (!can_send(rs) && (ret = wait_writable(rs, flags)))
			break;
		uint32_t n = left;
		if (olen < left) {
			n = olen;
			if (olen < RS_MAX_TRANSFER)
				olen <<= 1;
		}
		if (n > rs->sbuf_avail)
			n = rs->sbuf_avail;
		if (n > iom->offset + iom->sge.length - offset)
			n = iom->offset + iom->sge.length - offset;
		/* a plain RDMA WRITE: it takes no receive of the peer's, so no sequence number */
		ret = send_chunk(rs, in, n, rs_msg(RS_OP_WRITE, n), 0, iom->sge.addr + offset - iom->offset, iom->sge.key);
		if (ret) {
			set_error(rs, errno);
			break;
		}
		in += n;
		left -= n;
		offset += n;
	}
	pthread_mutex_unlock(&rs->mu);
	return (ret && left == count) ? (size_t)-1 : count - left;
}
