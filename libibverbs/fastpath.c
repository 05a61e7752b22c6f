/*
 * The fast path: work requests into the shared send/receive rings, completions out of
 * the CQ ring, the doorbell. No control call and no allocation here; the ring protocol
 * is wire.Ring's (docs/verbs-service.md, "Rings in shared memory").
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "rocelab.h"

static uint32_t *word(uint8_t *mem, int off)
{
	return (uint32_t *)(mem + off);
}

static uint32_t load(uint8_t *mem, int off)
{
	return __atomic_load_n(word(mem, off), __ATOMIC_SEQ_CST);
}

static void store(uint8_t *mem, int off, uint32_t v)
{
	__atomic_store_n(word(mem, off), v, __ATOMIC_SEQ_CST);
}

static uint8_t *entry(struct rl_ring *r, uint32_t i)
{
	return r->mem + RL_RING_HEADER + (size_t)(i & (r->cap - 1)) * r->entry;
}

/* rl_doorbell: the eventfd only when the service has not seen an earlier post and its
 * loop sleeps (wire.Pending, wire.Awake). */
void rl_doorbell(struct rl_context *ctx)
{
	if (__atomic_exchange_n(word(ctx->page, RL_DOORBELL_PENDING), 1, __ATOMIC_SEQ_CST) == 0 &&
	    load(ctx->page, RL_DOORBELL_AWAKE) == 0) {
		static const uint64_t one = 1;
		(void)!write(ctx->bell_fd, &one, sizeof(one));
	}
}

/* room reports the error a post into w gets, or 0. */
static int room(struct rl_wq *w, int nsge)
{
	if (load(w->ring.mem, RL_RING_ERROR) != RL_RING_OK)
		return EINVAL;
	if (w->prod - load(w->ring.mem, RL_RING_CONS) >= w->ring.cap)
		return ENOMEM;
	if (nsge < 0 || (uint32_t)nsge > w->max_sge)
		return EINVAL;
	return 0;
}

static void publish(struct rl_wq *w, uint32_t from, struct rl_context *ctx)
{
	if (w->prod == from)
		return;
	store(w->ring.mem, RL_RING_PROD, w->prod);
	rl_doorbell(ctx);
}

/* put_inline copies the data of sgl into the slot's bounce buffer and points the WQE at
 * it: IBV_SEND_INLINE lets the caller reuse its buffers when the post returns. */
static int put_inline(struct rl_qp *qp, struct rl_send_wqe *w, const struct ibv_sge *sgl, int n)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += sgl[i].length;
	if (total > qp->cap.max_inline_data) /* what the QP was granted; slots are rounded up */
		return EINVAL;
	uint8_t *slot = qp->inline_buf + (size_t)(qp->sq.prod & (qp->sq.ring.cap - 1)) * qp->max_inline, *p = slot;
	for (int i = 0; i < n; i++) {
		memcpy(p, (void *)(uintptr_t)sgl[i].addr, sgl[i].length);
		p += sgl[i].length;
	}
	struct rl_sge *s = (struct rl_sge *)(w + 1);
	w->nsge = total ? 1 : 0;
	s->addr = (uintptr_t)slot;
	s->length = total;
	s->lkey = qp->inline_mr->lkey;
	return 0;
}

/* put_bind encodes a BIND_MW WQE in the send WQE's fields (wire.h, ring.go): the
 * window's rkey and its new one, the range, the MR's lkey and the access flags. */
static void put_bind(struct rl_send_wqe *w, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	w->rkey = mw ? mw->rkey : 0;
	w->inv_rkey = rkey;
	w->remote_addr = info->addr;
	w->compare_add = info->length;
	w->swap = (uint64_t)(info->mr ? info->mr->lkey : 0) | (uint64_t)info->mw_access_flags << 32;
}

static int put_send(struct rl_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_qp *q = &qp->qpx.qp_base;
	int err = room(&qp->sq, wr->num_sge);
	if (err)
		return err;
	struct rl_send_wqe *w = (struct rl_send_wqe *)entry(&qp->sq.ring, qp->sq.prod);
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->flags = wr->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_SEND_WITH_IMM:
		w->imm = be32toh(wr->imm_data);
		/* fall through */
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		if (wr->opcode != IBV_WR_SEND_WITH_IMM) {
			w->rkey = wr->wr.rdma.rkey;
			w->remote_addr = wr->wr.rdma.remote_addr;
		}
		break;
	case IBV_WR_SEND:
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		w->inv_rkey = wr->invalidate_rkey;
		break;
	case IBV_WR_BIND_MW:
		put_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->rkey = wr->wr.atomic.rkey;
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
		break;
	default:
		rl_unsupported("ibv_post_send with opcodes other than RDMA WRITE/READ, SEND, atomics, bind MW and local invalidate (TSO)");
		return EOPNOTSUPP;
	}
	if (q->qp_type == IBV_QPT_UD) {
		if (!wr->wr.ud.ah || wr->wr.ud.ah->context != q->context)
			return EINVAL;
		w->ah = ((struct rl_ah *)wr->wr.ud.ah)->h;
		w->remote_qpn = wr->wr.ud.remote_qpn;
		w->remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (q->qp_type == IBV_QPT_XRC_SEND)
		w->remote_qpn = wr->qp_type.xrc.remote_srqn; /* the service reads it as the SRQ number */
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (!qp->inline_buf)
			return EINVAL; /* created with max_inline_data 0 */
		if ((err = put_inline(qp, w, wr->sg_list, wr->num_sge)))
			return err;
	} else {
		struct rl_sge *s = (struct rl_sge *)(w + 1);
		w->nsge = wr->num_sge;
		for (int i = 0; i < wr->num_sge; i++)
			s[i] = (struct rl_sge){wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
	}
	qp->sq.prod++;
	return 0;
}

int rl_post_send(struct ibv_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rl_qp *qp = (struct rl_qp *)q;
	int err = 0;
	if (q->qp_type == IBV_QPT_XRC_RECV) { /* an XRC target has no send queue */
		*bad = wr;
		return EINVAL;
	}
	/* As rxe: a QP sends from RTS on (its kernel's rxe_post_send: "qp not ready to
	 * send"); ERR is past RTS, and what is posted there completes flushed. The state
	 * is the service's (the send ring's header): the CM agent moves QPs too. */
	if (load(qp->sq.ring.mem, RL_RING_QP_STATE) < IBV_QPS_RTS) {
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->sq.lock);
	uint32_t from = qp->sq.prod;
	for (; wr; wr = wr->next)
		if ((err = put_send(qp, wr))) {
			*bad = wr;
			break;
		}
	publish(&qp->sq, from, rl_ctx(q->context));
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

static int put_recv(struct rl_wq *w, struct ibv_recv_wr *wr)
{
	int err = room(w, wr->num_sge);
	if (err)
		return err;
	struct rl_recv_wqe *e = (struct rl_recv_wqe *)entry(&w->ring, w->prod);
	e->wr_id = wr->wr_id;
	e->nsge = wr->num_sge;
	e->zero = 0;
	struct rl_sge *s = (struct rl_sge *)(e + 1);
	for (int i = 0; i < wr->num_sge; i++)
		s[i] = (struct rl_sge){wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
	w->prod++;
	return 0;
}

static int post_recv_list(struct rl_wq *w, struct rl_context *ctx, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int err = 0;
	pthread_spin_lock(&w->lock);
	uint32_t from = w->prod;
	for (; wr; wr = wr->next)
		if ((err = put_recv(w, wr))) {
			*bad = wr;
			break;
		}
	publish(w, from, ctx);
	pthread_spin_unlock(&w->lock);
	return err;
}

int rl_post_recv(struct ibv_qp *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct rl_qp *qp = (struct rl_qp *)q;
	if (q->qp_type == IBV_QPT_XRC_SEND || q->qp_type == IBV_QPT_XRC_RECV) {
		*bad = wr;
		return EINVAL; /* no receive queue: an XRC target receives through its domain's XRC SRQs */
	}
	if (q->srq || load(qp->sq.ring.mem, RL_RING_QP_STATE) == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL; /* the QP receives from its SRQ; none in RESET (rxe, IBTA C10-97.2.1) */
	}
	if (!qp->rq.ring.mem) {
		*bad = wr;
		return ENOMEM; /* a send-only QP: a receive queue of 0 is always full */
	}
	return post_recv_list(&qp->rq, rl_ctx(q->context), wr, bad);
}

int rl_post_srq_recv(struct ibv_srq *s, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct rl_srq *srq = (struct rl_srq *)s;
	return post_recv_list(&srq->rq, rl_ctx(s->context), wr, bad);
}

static void to_wc(const struct rl_cqe *e, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = e->wr_id;
	wc->status = e->status;
	wc->opcode = e->opcode;
	wc->vendor_err = e->vendor_err;
	wc->byte_len = e->byte_len;
	wc->wc_flags = e->flags;
	if (e->flags & IBV_WC_WITH_INV)
		wc->invalidated_rkey = e->imm;
	else
		wc->imm_data = htobe32(e->imm);
	wc->qp_num = e->qp_num;
	wc->src_qp = e->src_qp;
	wc->pkey_index = e->pkey_index;
	wc->sl = e->sl;
}

/* empty_poll is an ibv_poll_cq that found nothing. A busy-polling application (perftest
 * never sleeps) shares the CPUs with the lab's device loop, which does the work a
 * kernel rxe would do in softirq, preempting the application; here the loop is a
 * thread like any other, so a run of empty polls yields the CPU to it. Not every empty
 * poll: a completion that is microseconds away (a latency test's answer) is caught by
 * spinning, while a yield costs a scheduler round trip (64 B send_lat p50 42–46 µs
 * yielding on every empty poll, against 7.9 µs for the Go tool, which spins). */
static __thread unsigned empty_polls;

static void empty_poll(void)
{
	if (++empty_polls % 256 == 0)
		sched_yield();
}

int rl_poll_cq(struct ibv_cq *c, int n, struct ibv_wc *wc)
{
	struct rl_cq *cq = (struct rl_cq *)c;
	pthread_spin_lock(&cq->lock); /* ibv_resize_cq replaces the ring under it */
	if (load(cq->ring.mem, RL_RING_ERROR) != RL_RING_OK) {
		pthread_spin_unlock(&cq->lock);
		return -EOVERFLOW; /* the CQ overran, as a hardware CQ overrun */
	}
	uint32_t prod = __atomic_load_n(word(cq->ring.mem, RL_RING_PROD), __ATOMIC_ACQUIRE);
	int got = 0;
	while (cq->cons != prod && got < n) {
		struct rl_cqe e;
		memcpy(&e, entry(&cq->ring, cq->cons), sizeof(e));
		to_wc(&e, &wc[got++]);
		cq->cons++;
	}
	if (got)
		__atomic_store_n(word(cq->ring.mem, RL_RING_CONS), cq->cons, __ATOMIC_RELEASE);
	pthread_spin_unlock(&cq->lock);
	if (got < n && rl_dead(rl_ctx(c->context))) /* after the ring's own completions */
		got += rl_fatal_flush(cq, n - got, wc + got);
	if (!got)
		empty_poll();
	else
		empty_polls = 0;
	return got;
}

/* rl_cq_clean drops qpn's completions from the entries not yet polled, as rdma-core's
 * providers do when a QP is reset or destroyed (libmlx5's mlx5_cq_clean): a QP brought
 * back from ERR through RESET must not find its flushed completions of before. The
 * service only writes at and beyond Prod, so the entries below a snapshot of it are the
 * client's to move: the survivors are packed towards the snapshot and the consumer
 * index skips the dropped ones. */
void rl_cq_clean(struct ibv_cq *c, uint32_t qpn)
{
	struct rl_cq *cq = (struct rl_cq *)c;
	pthread_spin_lock(&cq->lock);
	uint32_t prod = __atomic_load_n(word(cq->ring.mem, RL_RING_PROD), __ATOMIC_ACQUIRE), to = prod;
	for (uint32_t i = prod; i != cq->cons; i--) {
		struct rl_cqe *e = (struct rl_cqe *)entry(&cq->ring, i - 1);
		if (e->qp_num == qpn)
			continue;
		if (--to != i - 1)
			memcpy(entry(&cq->ring, to), e, sizeof(*e));
	}
	if (to != cq->cons) {
		cq->cons = to;
		__atomic_store_n(word(cq->ring.mem, RL_RING_CONS), cq->cons, __ATOMIC_RELEASE);
	}
	pthread_spin_unlock(&cq->lock);
}

/* rl_req_notify_cq arms the CQ in its ring; whoever disarms it raises the one event
 * (package rnic's semantics: completions already queued raise it at once). */
int rl_req_notify_cq(struct ibv_cq *c, int solicited_only)
{
	struct rl_cq *cq = (struct rl_cq *)c;
	(void)solicited_only;
	if (!cq->chan)
		return EINVAL;
	pthread_spin_lock(&cq->lock); /* ibv_resize_cq replaces the ring under it */
	store(cq->ring.mem, RL_RING_ARMED, 1);
	uint32_t one = 1;
	if (load(cq->ring.mem, RL_RING_PROD) != cq->cons &&
	    __atomic_compare_exchange_n(word(cq->ring.mem, RL_RING_ARMED), &one, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		static const uint64_t inc = 1;
		__atomic_add_fetch(word(cq->ring.mem, RL_RING_EVENTS), 1, __ATOMIC_SEQ_CST);
		(void)!write(cq->chan->ch.fd, &inc, sizeof(inc));
	}
	pthread_spin_unlock(&cq->lock);
	return 0;
}

/* ---- ibv_cq_ex: start_poll / next_poll / end_poll and the readers ---- */

#define CQX(x) ((struct rl_cq *)(x))

static int next_cqe(struct rl_cq *cq)
{
	if (load(cq->ring.mem, RL_RING_ERROR) != RL_RING_OK)
		return EOVERFLOW;
	uint32_t prod = __atomic_load_n(word(cq->ring.mem, RL_RING_PROD), __ATOMIC_ACQUIRE);
	if (cq->cons == prod) {
		empty_poll();
		return ENOENT;
	}
	empty_polls = 0;
	memcpy(&cq->cur, entry(&cq->ring, cq->cons), sizeof(cq->cur));
	cq->cons++;
	cq->cq.wr_id = cq->cur.wr_id;
	cq->cq.status = cq->cur.status;
	return 0;
}

static int start_poll(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr)
{
	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&CQX(x)->lock);
	int err = next_cqe(CQX(x));
	if (err)
		pthread_spin_unlock(&CQX(x)->lock);
	return err;
}

static int next_poll(struct ibv_cq_ex *x)
{
	return next_cqe(CQX(x));
}

static void end_poll(struct ibv_cq_ex *x)
{
	struct rl_cq *cq = CQX(x);
	__atomic_store_n(word(cq->ring.mem, RL_RING_CONS), cq->cons, __ATOMIC_RELEASE);
	pthread_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *x) { return CQX(x)->cur.opcode; }
static uint32_t read_vendor_err(struct ibv_cq_ex *x) { return CQX(x)->cur.vendor_err; }
static uint32_t read_byte_len(struct ibv_cq_ex *x) { return CQX(x)->cur.byte_len; }
static __be32 read_imm_data(struct ibv_cq_ex *x) { return htobe32(CQX(x)->cur.imm); }
static uint32_t read_qp_num(struct ibv_cq_ex *x) { return CQX(x)->cur.qp_num; }
static uint32_t read_src_qp(struct ibv_cq_ex *x) { return CQX(x)->cur.src_qp; }
static unsigned int read_wc_flags(struct ibv_cq_ex *x) { return CQX(x)->cur.flags; }
static uint32_t read_slid(struct ibv_cq_ex *x) { (void)x; return 0; }
static uint8_t read_sl(struct ibv_cq_ex *x) { return CQX(x)->cur.sl; }
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *x) { (void)x; return 0; }

void rl_cq_ex_init(struct rl_cq *cq)
{
	struct ibv_cq_ex *x = &cq->cq;
	x->start_poll = start_poll;
	x->next_poll = next_poll;
	x->end_poll = end_poll;
	x->read_opcode = read_opcode;
	x->read_vendor_err = read_vendor_err;
	x->read_byte_len = read_byte_len;
	x->read_imm_data = read_imm_data;
	x->read_qp_num = read_qp_num;
	x->read_src_qp = read_src_qp;
	x->read_wc_flags = read_wc_flags;
	x->read_slid = read_slid;
	x->read_sl = read_sl;
	x->read_dlid_path_bits = read_dlid_path_bits;
}

/* ---- ibv_qp_ex: the ibv_wr_* API. wr_start takes the send queue, each builder writes
 * one WQE at prod, wr_complete publishes them all (wr_abort drops them). ---- */

#define QPX(x) ((struct rl_qp *)(x))

static struct rl_send_wqe *wr_new(struct ibv_qp_ex *x, uint8_t opcode)
{
	struct rl_qp *qp = QPX(x);
	if (qp->wr_err)
		return NULL;
	if (qp->wr_cur) /* the previous WR is whole: it counts */
		qp->sq.prod++;
	int err = room(&qp->sq, 0);
	if (err) {
		qp->wr_err = err;
		qp->wr_cur = NULL;
		return NULL;
	}
	struct rl_send_wqe *w = (struct rl_send_wqe *)entry(&qp->sq.ring, qp->sq.prod);
	memset(w, 0, sizeof(*w));
	w->wr_id = x->wr_id;
	w->opcode = opcode;
	w->flags = x->wr_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
	qp->wr_cur = w;
	return w;
}

static void wr_start(struct ibv_qp_ex *x)
{
	struct rl_qp *qp = QPX(x);
	pthread_spin_lock(&qp->sq.lock);
	qp->wr_first = qp->sq.prod;
	qp->wr_err = x->qp_base.qp_type == IBV_QPT_XRC_RECV || load(qp->sq.ring.mem, RL_RING_QP_STATE) < IBV_QPS_RTS
			     ? EINVAL
			     : 0; /* as rl_post_send */
	qp->wr_cur = NULL;
}

static int wr_complete(struct ibv_qp_ex *x)
{
	struct rl_qp *qp = QPX(x);
	int err = qp->wr_err;
	if (!err && qp->wr_cur)
		qp->sq.prod++;
	if (err)
		qp->sq.prod = qp->wr_first;
	qp->wr_cur = NULL;
	publish(&qp->sq, qp->wr_first, rl_ctx(x->qp_base.context));
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

static void wr_abort(struct ibv_qp_ex *x)
{
	struct rl_qp *qp = QPX(x);
	qp->sq.prod = qp->wr_first;
	qp->wr_cur = NULL;
	pthread_spin_unlock(&qp->sq.lock);
}

static void wr_rdma(struct ibv_qp_ex *x, uint8_t op, uint32_t rkey, uint64_t addr, uint32_t imm)
{
	struct rl_send_wqe *w = wr_new(x, op);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->imm = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	wr_rdma(x, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, be32toh(imm));
}

static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	wr_rdma(x, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_send(struct ibv_qp_ex *x)
{
	wr_new(x, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct rl_send_wqe *w = wr_new(x, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm = be32toh(imm);
}

static void wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct rl_send_wqe *w = wr_new(x, IBV_WR_SEND_WITH_INV);
	if (w)
		w->inv_rkey = rkey;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap)
{
	struct rl_send_wqe *w = wr_new(x, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = compare;
		w->swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct rl_send_wqe *w = wr_new(x, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = add;
	}
}

static void wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct rl_qp *qp = QPX(x);
	if (!qp->wr_cur)
		return;
	if (!ah || ah->context != x->qp_base.context) {
		qp->wr_err = EINVAL;
		return;
	}
	qp->wr_cur->ah = ((struct rl_ah *)ah)->h;
	qp->wr_cur->remote_qpn = qpn;
	qp->wr_cur->remote_qkey = qkey;
}

static void wr_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sgl)
{
	struct rl_qp *qp = QPX(x);
	if (!qp->wr_cur)
		return;
	if (n > qp->sq.max_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	struct rl_sge *s = (struct rl_sge *)(qp->wr_cur + 1);
	qp->wr_cur->nsge = n;
	for (size_t i = 0; i < n; i++)
		s[i] = (struct rl_sge){sgl[i].addr, sgl[i].length, sgl[i].lkey};
}

static void wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge s = {.addr = addr, .length = length, .lkey = lkey};
	wr_set_sge_list(x, 1, &s);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs)
{
	struct rl_qp *qp = QPX(x);
	if (!qp->wr_cur)
		return;
	if (!qp->inline_buf || n > 16) {
		qp->wr_err = EINVAL;
		return;
	}
	struct ibv_sge sgl[16];
	for (size_t i = 0; i < n; i++)
		sgl[i] = (struct ibv_sge){.addr = (uintptr_t)bufs[i].addr, .length = bufs[i].length};
	int err = put_inline(qp, qp->wr_cur, sgl, n);
	if (err)
		qp->wr_err = err;
}

static void wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	wr_set_inline_data_list(x, 1, &b);
}

/* builders of operations the soft-RNIC lacks: the batch fails at wr_complete */
static void wr_unsupported(struct ibv_qp_ex *x, const char *verb)
{
	rl_unsupported(verb);
	QPX(x)->wr_err = EOPNOTSUPP;
}

static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct rl_send_wqe *w = wr_new(x, IBV_WR_BIND_MW);
	if (w)
		put_bind(w, mw, rkey, info);
}

static void wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct rl_send_wqe *w = wr_new(x, IBV_WR_LOCAL_INV);
	if (w)
		w->inv_rkey = rkey;
}

static void wr_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	wr_unsupported(x, "ibv_wr_send_tso");
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	struct rl_qp *qp = QPX(x);
	if (!qp->wr_cur)
		return;
	if (x->qp_base.qp_type != IBV_QPT_XRC_SEND) {
		qp->wr_err = EINVAL;
		return;
	}
	qp->wr_cur->remote_qpn = srqn; /* as put_send: the SRQ number in the remote QPN field */
}

static void wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, const void *wr)
{
	(void)rkey, (void)addr, (void)wr;
	wr_unsupported(x, "ibv_wr_atomic_write");
}

void rl_qp_ex_init(struct rl_qp *qp)
{
	struct ibv_qp_ex *x = &qp->qpx;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_atomic_write = wr_atomic_write;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
}
