/*
 * The control verbs: PDs, MRs, completion channels, CQs, SRQs, AHs, QPs. Each is one
 * request/response with the verbs service; the queues come back as rings in shared
 * memory that the fast path (fastpath.c) reads and writes without calls.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rocelab.h"
#include "private.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define PAGE 4096ul

static struct rl_context *ctx_of(struct ibv_context *c)
{
	return rl_ctx(c);
}

static int fail(int err)
{
	errno = err;
	return err;
}

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

/* ---- PD ---- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct rl_pd *pd = calloc(1, sizeof(*pd));
	if (!pd)
		return fail_null(ENOMEM);
	struct rl_handle r;
	int err = rl_call(ctx_of(c), RL_OP_ALLOC_PD, NULL, 0, &r, sizeof(r), -1, NULL, 0);
	if (err) {
		free(pd);
		return fail_null(err);
	}
	pd->pd.context = c;
	pd->pd.handle = r.handle;
	pd->h = r.handle;
	return &pd->pd;
}

int ibv_dealloc_pd(struct ibv_pd *p)
{
	struct rl_pd *pd = (struct rl_pd *)p;
	struct rl_handle h = {pd->h};
	int err = rl_call(ctx_of(p->context), RL_OP_DEALLOC_PD, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (!err)
		free(pd);
	return err;
}

/* ---- MR ---- */

static const int known_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *p, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct rl_pd *pd = (struct rl_pd *)p;
	/* rdma-core drops the optional flags a device does not know (relaxed ordering) */
	access &= ~IBV_ACCESS_OPTIONAL_RANGE;
	if (access & ~known_access) {
		rl_unsupported("ibv_reg_mr with access flags beyond local write, remote read/write/atomic, MW bind");
		return NULL;
	}
	if (length == 0 || !addr)
		return fail_null(EINVAL);
	uintptr_t a = (uintptr_t)addr, start = a & ~(PAGE - 1), end = (a + length + PAGE - 1) & ~(PAGE - 1);
	if (a + length < a || iova < a - start)
		return fail_null(EINVAL);
	int fd, err = rl_share_range(start, end, &fd);
	if (err)
		return fail_null(err);
	/* The service maps whole pages from the arena's page-aligned offset; the region it
	 * registers starts at the page, named so that iova names addr. */
	struct rl_reg_mr req = {.pd = pd->h, .access = access, .length = end - start, .offset = start,
				.addr = iova - (a - start)};
	struct rl_mr_resp r;
	struct rl_mr *mr = calloc(1, sizeof(*mr));
	if (!mr)
		return fail_null(ENOMEM);
	if ((err = rl_call(ctx_of(p->context), RL_OP_REG_MR, &req, sizeof(req), &r, sizeof(r), fd, NULL, 0))) {
		free(mr);
		return fail_null(err);
	}
	mr->h = r.handle;
	mr->mr.context = p->context;
	mr->mr.pd = p;
	mr->mr.addr = addr;
	mr->mr.length = length;
	mr->mr.handle = r.handle;
	mr->mr.lkey = r.lkey;
	mr->mr.rkey = r.rkey;
	return &mr->mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

/* ibv_rereg_mr takes rdma-core's input checks and return codes (enum
 * ibv_rereg_mr_err_code); what it changes is what rxe changes: the PD and the access
 * flags, keeping the keys. A new translation (address, length) fails as rxe's
 * (IBV_REREG_MR_ERR_CMD, errno EOPNOTSUPP). */
int ibv_rereg_mr(struct ibv_mr *m, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct rl_mr *mr = (struct rl_mr *)m;
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) || ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		errno = EOPNOTSUPP;
		return IBV_REREG_MR_ERR_CMD;
	}
	struct rl_rereg_mr req = {.handle = mr->h, .access = access,
				  .change_pd = !!(flags & IBV_REREG_MR_CHANGE_PD),
				  .change_access = !!(flags & IBV_REREG_MR_CHANGE_ACCESS)};
	if (req.change_pd)
		req.pd = ((struct rl_pd *)pd)->h;
	int err = rl_call(ctx_of(m->context), RL_OP_REREG_MR, &req, sizeof(req), NULL, 0, -1, NULL, 0);
	if (err) {
		errno = err;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (req.change_pd)
		m->pd = pd;
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *m)
{
	struct rl_mr *mr = (struct rl_mr *)m;
	struct rl_handle h = {mr->h};
	int err = rl_call(ctx_of(m->context), RL_OP_DEREG_MR, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (!err)
		free(mr);
	return err;
}

/* ---- memory windows (rxe's: the soft-RNIC binds them in the transport) ---- */

struct ibv_mw *rl_alloc_mw(struct ibv_pd *p, enum ibv_mw_type type)
{
	struct rl_pd *pd = (struct rl_pd *)p;
	struct rl_alloc_mw req = {.pd = pd->h, .type = type};
	struct rl_mw_resp r;
	struct rl_mw *mw = calloc(1, sizeof(*mw));
	if (!mw)
		return fail_null(ENOMEM);
	int err = rl_call(ctx_of(p->context), RL_OP_ALLOC_MW, &req, sizeof(req), &r, sizeof(r), -1, NULL, 0);
	if (err) {
		free(mw);
		return fail_null(err);
	}
	mw->h = r.handle;
	mw->mw.context = p->context;
	mw->mw.pd = p;
	mw->mw.rkey = r.rkey;
	mw->mw.handle = r.handle;
	mw->mw.type = type;
	return &mw->mw;
}

int rl_dealloc_mw(struct ibv_mw *m)
{
	struct rl_mw *mw = (struct rl_mw *)m;
	struct rl_handle h = {mw->h};
	int err = rl_call(ctx_of(m->context), RL_OP_DEALLOC_MW, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (!err)
		free(mw);
	return err;
}

/* bind_mw is rxe's: a type 1 bind is the post of a BIND_MW WR with the next rkey, which
 * the window takes at once (the caller undoes it if the completion fails). */
int rl_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	struct ibv_mw_bind_info *info = &b->bind_info;
	if (!info->mr && (info->addr || info->length))
		return EINVAL;
	if (info->mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;
	if (info->mr && info->mr->pd != mw->pd)
		return EPERM;
	struct ibv_send_wr wr = {.wr_id = b->wr_id, .opcode = IBV_WR_BIND_MW, .send_flags = b->send_flags}, *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = *info;
	int err = ibv_post_send(qp, &wr, &bad);
	if (!err)
		mw->rkey = wr.bind_mw.rkey;
	return err;
}

/* ---- completion channels ---- */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	struct rl_channel *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return fail_null(ENOMEM);
	int fd = eventfd(0, EFD_CLOEXEC);
	if (fd < 0) {
		free(ch);
		return NULL;
	}
	struct rl_handle r;
	int err = rl_call(ctx_of(c), RL_OP_CREATE_COMP_CHANNEL, NULL, 0, &r, sizeof(r), fd, NULL, 0);
	if (err) {
		close(fd);
		free(ch);
		return fail_null(err);
	}
	pthread_mutex_init(&ch->mu, NULL);
	ch->h = r.handle;
	ch->ch.context = c;
	ch->ch.fd = fd;
	rl_fatal_track_fd(ctx_of(c), ch->ch.fd);
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct rl_channel *ch = (struct rl_channel *)channel;
	if (ch->cqs)
		return fail(EBUSY);
	struct rl_handle h = {ch->h};
	int err = rl_call(ctx_of(channel->context), RL_OP_DESTROY_COMP_CHANNEL, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (err)
		return err;
	rl_fatal_untrack_fd(ctx_of(channel->context), ch->ch.fd);
	close(channel->fd);
	free(ch);
	return 0;
}

static uint32_t *word(struct rl_ring *r, int off)
{
	return (uint32_t *)(r->mem + off);
}

/* take finds a CQ of the channel with an event not yet returned. */
static struct rl_cq *take(struct rl_channel *ch, int *more)
{
	struct rl_cq *got = NULL;
	*more = 0;
	pthread_mutex_lock(&ch->mu);
	for (struct rl_cq *cq = ch->cqs; cq; cq = cq->next) {
		if (__atomic_load_n(word(&cq->ring, RL_RING_EVENTS), __ATOMIC_ACQUIRE) == cq->seen)
			continue;
		if (got) {
			*more = 1;
			break;
		}
		cq->seen++;
		got = cq;
		if (__atomic_load_n(word(&cq->ring, RL_RING_EVENTS), __ATOMIC_ACQUIRE) != cq->seen) {
			*more = 1;
			break;
		}
	}
	pthread_mutex_unlock(&ch->mu);
	return got;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct rl_channel *ch = (struct rl_channel *)channel;
	for (;;) {
		int more;
		struct rl_cq *got = take(ch, &more);
		if (got) {
			static const uint64_t one = 1;
			if (more) /* keep the fd readable for the events still queued */
				(void)!write(channel->fd, &one, sizeof(one));
			*cq = (struct ibv_cq *)&got->cq;
			*cq_context = got->cq.cq_context;
			return 0;
		}
		if (rl_dead(ctx_of(channel->context))) {
			errno = EIO; /* the RNIC is gone: its queued events were taken */
			return -1;
		}
		uint64_t v;
		ssize_t n = read(channel->fd, &v, sizeof(v)); /* blocks unless the app set O_NONBLOCK */
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- CQ ---- */

static int map_ring(struct rl_ring *ring, int fd, const struct rl_ring_resp *r, uint32_t min_entry)
{
	if (r->cap == 0 || (r->cap & (r->cap - 1)) || r->entry_size < min_entry ||
	    r->size < RL_RING_HEADER + (uint64_t)r->cap * r->entry_size) {
		close(fd);
		return EPROTO;
	}
	ring->mem = rl_map(fd, r->size);
	close(fd);
	if (!ring->mem)
		return ENOMEM;
	ring->cap = r->cap;
	ring->entry = r->entry_size;
	return 0;
}

static void destroy_handle(struct rl_context *ctx, uint16_t op, uint32_t h)
{
	struct rl_handle req = {h};
	rl_call(ctx, op, &req, sizeof(req), NULL, 0, -1, NULL, 0);
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct rl_context *ctx = ctx_of(c);
	if (cqe < 1 || (uint32_t)cqe > ctx->dattr.max_cqe || comp_vector < 0 || comp_vector >= c->num_comp_vectors)
		return fail_null(EINVAL);
	struct rl_channel *ch = (struct rl_channel *)channel;
	struct rl_create_cq req = {.cqe = cqe, .channel = ch ? ch->h : 0};
	struct rl_ring_resp r;
	int fd, err;
	struct rl_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return fail_null(ENOMEM);
	if ((err = rl_call(ctx, RL_OP_CREATE_CQ, &req, sizeof(req), &r, sizeof(r), -1, &fd, 1))) {
		free(cq);
		return fail_null(err);
	}
	if ((err = map_ring(&cq->ring, fd, &r, sizeof(struct rl_cqe)))) {
		destroy_handle(ctx, RL_OP_DESTROY_CQ, r.handle);
		free(cq);
		return fail_null(err);
	}
	cq->h = r.handle;
	cq->size = r.size;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->cq.context = c;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.handle = r.handle;
	cq->cq.cqe = r.cap;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	rl_cq_ex_init(cq);
	if (ch) {
		pthread_mutex_lock(&ch->mu);
		cq->chan = ch;
		cq->seen = __atomic_load_n(word(&cq->ring, RL_RING_EVENTS), __ATOMIC_ACQUIRE);
		cq->next = ch->cqs;
		ch->cqs = cq;
		pthread_mutex_unlock(&ch->mu);
	}
	if ((err = rl_register(ctx, r.handle, &cq->cq))) {
		ibv_destroy_cq((struct ibv_cq *)&cq->cq);
		return fail_null(err);
	}
	return (struct ibv_cq *)&cq->cq;
}

struct ibv_cq_ex *rl_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr)
{
	const uint64_t known = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
			       IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
			       IBV_WC_EX_WITH_DLID_PATH_BITS;
	if (attr->wc_flags & ~known) {
		rl_unsupported("ibv_create_cq_ex with completion timestamps or flow tags");
		return NULL;
	}
	if (attr->comp_mask & ~IBV_CQ_INIT_ATTR_MASK_FLAGS || attr->flags) {
		rl_unsupported("ibv_create_cq_ex with a parent domain or CQ flags");
		return NULL;
	}
	return (struct ibv_cq_ex *)ibv_create_cq(c, attr->cqe, attr->cq_context, attr->channel, attr->comp_vector);
}

int ibv_destroy_cq(struct ibv_cq *c)
{
	struct rl_cq *cq = (struct rl_cq *)c;
	struct rl_handle h = {cq->h};
	int err = rl_call(ctx_of(c->context), RL_OP_DESTROY_CQ, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (err)
		return err;
	rl_unregister(ctx_of(c->context), cq->h);
	if (cq->chan) {
		pthread_mutex_lock(&cq->chan->mu);
		for (struct rl_cq **p = &cq->chan->cqs; *p; p = &(*p)->next)
			if (*p == cq) {
				*p = cq->next;
				break;
			}
		pthread_mutex_unlock(&cq->chan->mu);
	}
	munmap(cq->ring.mem, cq->size);
	free(cq);
	return 0;
}

/* resize_ring asks the service to move a CQ's or SRQ's ring to one of at least n
 * entries and maps it in place of *ring (the caller holds the locks that keep every
 * user of the ring out). Indices carry over: the service copies the live entries to the
 * same free-running indices. */
static int resize_ring(struct rl_context *ctx, uint16_t op, uint32_t h, uint32_t n, struct rl_ring *ring, size_t *size,
		       uint32_t min_entry)
{
	struct rl_resize req = {.handle = h, .entries = n};
	struct rl_ring_resp r;
	struct rl_ring nr;
	int fd, err;
	if ((err = rl_call(ctx, op, &req, sizeof(req), &r, sizeof(r), -1, &fd, 1)))
		return err;
	/* A ring we cannot map leaves the object on a ring the service dropped: only an
	 * out-of-memory machine gets here, and the object is lost to it as to rxe's. */
	if ((err = map_ring(&nr, fd, &r, min_entry)))
		return err;
	munmap(ring->mem, *size);
	*ring = nr;
	*size = r.size;
	return 0;
}

int ibv_resize_cq(struct ibv_cq *c, int cqe)
{
	struct rl_cq *cq = (struct rl_cq *)c;
	struct rl_context *ctx = ctx_of(c->context);
	if (cqe < 1 || (uint32_t)cqe > ctx->dattr.max_cqe)
		return fail(EINVAL);
	if (cq->chan) /* ibv_get_cq_event reads the ring's event count under it */
		pthread_mutex_lock(&cq->chan->mu);
	pthread_spin_lock(&cq->lock);
	int err = resize_ring(ctx, RL_OP_RESIZE_CQ, cq->h, cqe, &cq->ring, &cq->size, sizeof(struct rl_cqe));
	if (!err)
		c->cqe = cq->ring.cap;
	pthread_spin_unlock(&cq->lock);
	if (cq->chan)
		pthread_mutex_unlock(&cq->chan->mu);
	return err ? fail(err) : 0;
}

/* ---- SRQ ---- */

/* create_srq creates a basic SRQ in p or, with xrcd, an XRC SRQ whose receives
 * complete on cq. */
static struct ibv_srq *create_srq(struct ibv_pd *p, struct ibv_srq_attr *a, void *srq_context, struct rl_xrcd *xrcd,
				  struct ibv_cq *cq)
{
	struct rl_context *ctx = ctx_of(p->context);
	struct rl_pd *pd = (struct rl_pd *)p;
	if (a->max_wr < 1 || a->max_wr > ctx->dattr.max_qp_wr || a->max_sge > ctx->dattr.max_sge)
		return fail_null(EINVAL);
	struct rl_xrc_srq_resp xr = {0};
	struct rl_ring_resp r;
	int fd, err;
	struct rl_srq *srq = calloc(1, sizeof(*srq));
	if (!srq)
		return fail_null(ENOMEM);
	if (xrcd) {
		struct rl_create_xrc_srq req = {.pd = pd->h, .max_wr = a->max_wr, .max_sge = a->max_sge, .xrcd = xrcd->h,
						.cq = ((struct rl_cq *)cq)->h};
		err = rl_call(ctx, RL_OP_CREATE_XRC_SRQ, &req, sizeof(req), &xr, sizeof(xr), -1, &fd, 1);
		r = xr.ring;
	} else {
		struct rl_create_srq req = {.pd = pd->h, .max_wr = a->max_wr, .max_sge = a->max_sge};
		err = rl_call(ctx, RL_OP_CREATE_SRQ, &req, sizeof(req), &r, sizeof(r), -1, &fd, 1);
	}
	if (err) {
		free(srq);
		return fail_null(err);
	}
	if ((err = map_ring(&srq->rq.ring, fd, &r, sizeof(struct rl_recv_wqe) + sizeof(struct rl_sge)))) {
		destroy_handle(ctx, RL_OP_DESTROY_SRQ, r.handle);
		free(srq);
		return fail_null(err);
	}
	srq->h = r.handle;
	srq->srqn = xr.srqn;
	srq->size = r.size;
	srq->rq.max_sge = (r.entry_size - sizeof(struct rl_recv_wqe)) / sizeof(struct rl_sge);
	srq->max_wr = r.cap;
	pthread_spin_init(&srq->rq.lock, PTHREAD_PROCESS_PRIVATE);
	srq->srq.context = p->context;
	srq->srq.srq_context = srq_context;
	srq->srq.pd = p;
	srq->srq.handle = r.handle;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	a->max_wr = r.cap;
	a->max_sge = srq->rq.max_sge;
	if (a->srq_limit) {
		struct rl_modify_srq m = {.handle = r.handle, .limit = a->srq_limit};
		if ((err = rl_call(ctx, RL_OP_MODIFY_SRQ, &m, sizeof(m), NULL, 0, -1, NULL, 0))) {
			ibv_destroy_srq(&srq->srq);
			return fail_null(err);
		}
	}
	if ((err = rl_register(ctx, r.handle, &srq->srq))) {
		ibv_destroy_srq(&srq->srq);
		return fail_null(err);
	}
	return &srq->srq;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *p, struct ibv_srq_init_attr *attr)
{
	return create_srq(p, &attr->attr, attr->srq_context, NULL, NULL);
}

/* ibv_create_srq_ex comes here for what ibv_create_srq cannot do: an XRC SRQ, which
 * needs a PD, an XRCD and a CQ (rdma-core's ibv_cmd_create_srq_ex asks the same). */
struct ibv_srq *rl_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	if (attr->comp_mask & ~need) {
		rl_unsupported("ibv_create_srq_ex with attributes beyond a type, PD, XRCD and CQ (tag matching)");
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd || attr->pd->context != c)
		return fail_null(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) || attr->srq_type == IBV_SRQT_BASIC)
		return create_srq(attr->pd, &attr->attr, attr->srq_context, NULL, NULL);
	if (attr->srq_type != IBV_SRQT_XRC) {
		rl_unsupported("ibv_create_srq_ex of a type other than basic and XRC (tag matching)");
		return NULL;
	}
	if ((attr->comp_mask & need) != need || !attr->xrcd || !attr->cq || attr->xrcd->context != c ||
	    attr->cq->context != c)
		return fail_null(EINVAL);
	return create_srq(attr->pd, &attr->attr, attr->srq_context, (struct rl_xrcd *)attr->xrcd, attr->cq);
}

int rl_get_srq_num(struct ibv_srq *s, uint32_t *srq_num)
{
	struct rl_srq *srq = (struct rl_srq *)s;
	if (!srq->srqn)
		return EINVAL; /* a basic SRQ has no number */
	*srq_num = srq->srqn;
	return 0;
}

/* ---- XRC domains ---- */

/* ibv_open_xrcd shares the domain of a file among the processes that open it: the
 * service knows the file by the device and inode fstat reports here. */
struct ibv_xrcd *rl_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr)
{
	if (attr->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))
		return fail_null(EOPNOTSUPP);
	/* rdma-core's ibv_cmd_open_xrcd: both fields are required */
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
		return fail_null(EINVAL);
	struct rl_open_xrcd req = {.oflags = (uint32_t)attr->oflags};
	if (attr->fd != -1) {
		struct stat st;
		if (fstat(attr->fd, &st))
			return fail_null(EBADF);
		req.dev = st.st_dev, req.ino = st.st_ino, req.has_file = 1;
	}
	struct rl_xrcd *x = calloc(1, sizeof(*x));
	if (!x)
		return fail_null(ENOMEM);
	struct rl_handle r;
	int err = rl_call(ctx_of(c), RL_OP_OPEN_XRCD, &req, sizeof(req), &r, sizeof(r), -1, NULL, 0);
	if (err) {
		free(x);
		return fail_null(err);
	}
	x->h = r.handle;
	x->xrcd.context = c;
	return &x->xrcd;
}

int rl_close_xrcd(struct ibv_xrcd *xrcd)
{
	struct rl_xrcd *x = (struct rl_xrcd *)xrcd;
	struct rl_handle h = {x->h};
	int err = rl_call(ctx_of(xrcd->context), RL_OP_CLOSE_XRCD, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (err)
		return err;
	free(x);
	return 0;
}

int ibv_modify_srq(struct ibv_srq *s, struct ibv_srq_attr *attr, int mask)
{
	struct rl_srq *srq = (struct rl_srq *)s;
	struct rl_context *ctx = ctx_of(s->context);
	if (mask & ~(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR))
		return fail(EINVAL);
	if (mask & IBV_SRQ_MAX_WR) { /* the device advertises IBV_DEVICE_SRQ_RESIZE, as rxe */
		if (attr->max_wr < 1 || attr->max_wr > ctx->dattr.max_qp_wr)
			return fail(EINVAL);
		pthread_spin_lock(&srq->rq.lock);
		int err = resize_ring(ctx, RL_OP_RESIZE_SRQ, srq->h, attr->max_wr, &srq->rq.ring, &srq->size,
				      sizeof(struct rl_recv_wqe) + sizeof(struct rl_sge));
		if (!err)
			srq->max_wr = srq->rq.ring.cap;
		pthread_spin_unlock(&srq->rq.lock);
		if (err)
			return fail(err);
	}
	if (!(mask & IBV_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > srq->max_wr)
		return fail(EINVAL);
	struct rl_modify_srq m = {.handle = srq->h, .limit = attr->srq_limit};
	return rl_call(ctx, RL_OP_MODIFY_SRQ, &m, sizeof(m), NULL, 0, -1, NULL, 0);
}

int ibv_query_srq(struct ibv_srq *s, struct ibv_srq_attr *attr)
{
	struct rl_srq *srq = (struct rl_srq *)s;
	memset(attr, 0, sizeof(*attr));
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->rq.max_sge;
	return 0;
}

int ibv_destroy_srq(struct ibv_srq *s)
{
	struct rl_srq *srq = (struct rl_srq *)s;
	struct rl_handle h = {srq->h};
	int err = rl_call(ctx_of(s->context), RL_OP_DESTROY_SRQ, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (err)
		return err;
	rl_unregister(ctx_of(s->context), srq->h);
	munmap(srq->rq.ring.mem, srq->size);
	free(srq);
	return 0;
}

/* ---- AH ---- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *p, struct ibv_ah_attr *attr)
{
	struct rl_pd *pd = (struct rl_pd *)p;
	if (!attr->is_global || attr->port_num != 1)
		return fail_null(EINVAL); /* RoCE needs the GRH: as the kernel's rxe */
	struct rl_create_ah req = {.pd = pd->h, .sgid_index = attr->grh.sgid_index,
				   .traffic_class = attr->grh.traffic_class, .hop_limit = attr->grh.hop_limit,
				   .flow_label = attr->grh.flow_label};
	memcpy(req.dgid, attr->grh.dgid.raw, 16);
	struct rl_handle r;
	struct rl_ah *ah = calloc(1, sizeof(*ah));
	if (!ah)
		return fail_null(ENOMEM);
	int err = rl_call(ctx_of(p->context), RL_OP_CREATE_AH, &req, sizeof(req), &r, sizeof(r), -1, NULL, 0);
	if (err) {
		free(ah);
		return fail_null(err);
	}
	ah->h = r.handle;
	ah->ah.context = p->context;
	ah->ah.pd = p;
	ah->ah.handle = r.handle;
	return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *a)
{
	struct rl_ah *ah = (struct rl_ah *)a;
	struct rl_handle h = {ah->h};
	int err = rl_call(ctx_of(a->context), RL_OP_DESTROY_AH, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (!err)
		free(ah);
	return err;
}

/* ibv_init_ah_from_wc: the reply path of a UD receive, from its GRH (RoCEv2: the GRH
 * slot holds the IPv4 header for IPv4 traffic, as rxe lays it out). */
int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port, struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah)
{
	struct rl_context *ctx = ctx_of(c);
	if (!(wc->wc_flags & IBV_WC_GRH))
		return fail(EINVAL);
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = port;
	const uint8_t *b = (const uint8_t *)grh;
	union ibv_gid dst, src;
	if ((b[20] >> 4) == 4) { /* IPv4 header in the last 20 bytes */
		memset(src.raw, 0, 16);
		src.raw[10] = src.raw[11] = 0xff;
		dst = src;
		memcpy(src.raw + 12, b + 20 + 12, 4);
		memcpy(dst.raw + 12, b + 20 + 16, 4);
		ah->grh.hop_limit = b[20 + 8];
		ah->grh.traffic_class = b[20 + 1];
	} else {
		memcpy(src.raw, grh->sgid.raw, 16);
		memcpy(dst.raw, grh->dgid.raw, 16);
		ah->grh.hop_limit = grh->hop_limit;
		uint32_t vtf = be32toh(grh->version_tclass_flow);
		ah->grh.traffic_class = (vtf >> 20) & 0xff;
		ah->grh.flow_label = vtf & 0xfffff;
	}
	ah->grh.dgid = src;
	int i = rl_gid_index(ctx, &dst);
	if (i < 0)
		return fail(ENOENT);
	ah->grh.sgid_index = i;
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port)
{
	struct ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

/* ---- QP ---- */

static int setup_inline(struct rl_qp *qp, struct ibv_pd *pd, uint32_t want)
{
	if (want == 0)
		return 0;
	if (want > RL_MAX_INLINE)
		return EINVAL;
	qp->max_inline = (want + 63) & ~63u;
	size_t size = ((size_t)qp->sq.ring.cap * qp->max_inline + PAGE - 1) & ~(PAGE - 1);
	qp->inline_buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (qp->inline_buf == MAP_FAILED) {
		qp->inline_buf = NULL;
		return ENOMEM;
	}
	qp->inline_mr = ibv_reg_mr(pd, qp->inline_buf, size, IBV_ACCESS_LOCAL_WRITE);
	return qp->inline_mr ? 0 : errno;
}

/* xrc_bindings drops from attr (create_qp's copy of the caller's) what an XRC QP has
 * none of, as rdma-core's providers ignore them: an XRC_SEND QP's receive side, an
 * XRC_RECV QP's CQs, SRQ and queues. It returns EINVAL for an XRC_RECV QP without an
 * XRCD and a QP of another type with one. */
static int xrc_bindings(struct ibv_qp_init_attr *attr, struct rl_xrcd *xrcd)
{
	switch (attr->qp_type) {
	case IBV_QPT_XRC_RECV:
		if (!xrcd)
			return EINVAL;
		attr->send_cq = NULL;
		attr->cap = (struct ibv_qp_cap){0};
		/* fall through */
	case IBV_QPT_XRC_SEND:
		attr->recv_cq = NULL;
		attr->srq = NULL;
		attr->cap.max_recv_wr = attr->cap.max_recv_sge = 0;
		break;
	default:
		break;
	}
	return xrcd && attr->qp_type != IBV_QPT_XRC_RECV ? EINVAL : 0;
}

/* create_qp creates a QP in PD p or, of type XRC_RECV, in domain xrcd (p NULL), and
 * writes the capacities granted into the caller's attributes. */
static struct ibv_qp *create_qp(struct ibv_context *c, struct ibv_pd *p, struct rl_xrcd *xrcd,
				struct ibv_qp_init_attr *caller, uint64_t send_ops)
{
	struct rl_context *ctx = ctx_of(c);
	struct ibv_qp_init_attr copy = *caller, *attr = &copy;
	struct rl_pd *pd = (struct rl_pd *)p;
	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD &&
	    attr->qp_type != IBV_QPT_XRC_SEND && attr->qp_type != IBV_QPT_XRC_RECV) {
		rl_unsupported("ibv_create_qp of a type other than RC, UC, UD, XRC_SEND and XRC_RECV");
		return NULL;
	}
	int xrc_recv = attr->qp_type == IBV_QPT_XRC_RECV;
	if (xrc_bindings(attr, xrcd) || (!xrc_recv && !p))
		return fail_null(EINVAL);
	struct ibv_qp_cap *k = &attr->cap;
	if ((!xrc_recv && !attr->send_cq) || (!attr->recv_cq && attr->qp_type != IBV_QPT_XRC_SEND && !xrc_recv) ||
	    k->max_send_wr > ctx->dattr.max_qp_wr || k->max_recv_wr > ctx->dattr.max_qp_wr ||
	    k->max_send_sge > ctx->dattr.max_sge || k->max_recv_sge > ctx->dattr.max_sge ||
	    k->max_inline_data > RL_MAX_INLINE)
		return fail_null(EINVAL);
	struct rl_srq *srq = (struct rl_srq *)attr->srq;
	struct rl_create_qp req = {.pd = xrc_recv ? xrcd->h : pd->h,
				   .send_cq = attr->send_cq ? ((struct rl_cq *)attr->send_cq)->h : 0,
				   .recv_cq = attr->recv_cq ? ((struct rl_cq *)attr->recv_cq)->h : 0,
				   .srq = srq ? srq->h : 0, .type = attr->qp_type, .sig_all = attr->sq_sig_all ? 1 : 0,
				   .max_send_wr = k->max_send_wr ? k->max_send_wr : 1, .max_recv_wr = k->max_recv_wr,
				   .max_send_sge = k->max_send_sge, .max_recv_sge = k->max_recv_sge};
	if (srq)
		req.max_recv_wr = req.max_recv_sge = 0;
	if (xrc_recv)
		req.max_send_wr = req.max_send_sge = 0;
	struct rl_qp_resp r;
	int fd, err;
	struct rl_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return fail_null(ENOMEM);
	if ((err = rl_call(ctx, RL_OP_CREATE_QP, &req, sizeof(req), &r, sizeof(r), -1, &fd, 1))) {
		free(qp);
		return fail_null(err);
	}
	qp->mem = rl_map(fd, r.size);
	close(fd);
	int bad = !qp->mem || r.sq_offset + RL_RING_HEADER > r.size ||
		  r.send_entry < sizeof(struct rl_send_wqe) + sizeof(struct rl_sge) * (r.max_send_sge ? r.max_send_sge : 1) ||
		  r.sq_offset + RL_RING_HEADER + (uint64_t)r.max_send_wr * r.send_entry > r.size;
	if (!bad && r.max_recv_wr)
		bad = r.rq_offset + RL_RING_HEADER > r.size ||
		      r.recv_entry < sizeof(struct rl_recv_wqe) + sizeof(struct rl_sge) * (r.max_recv_sge ? r.max_recv_sge : 1) ||
		      r.rq_offset + RL_RING_HEADER + (uint64_t)r.max_recv_wr * r.recv_entry > r.size;
	if (bad) {
		if (qp->mem)
			munmap(qp->mem, r.size);
		destroy_handle(ctx, RL_OP_DESTROY_QP, r.handle);
		free(qp);
		return fail_null(EPROTO);
	}
	qp->h = r.handle;
	qp->size = r.size;
	qp->sq.ring = (struct rl_ring){qp->mem + r.sq_offset, r.max_send_wr, r.send_entry};
	qp->sq.max_sge = r.max_send_sge;
	if (r.max_recv_wr) { /* none for an SRQ's QP and a send-only QP (max_recv_wr 0) */
		qp->rq.ring = (struct rl_ring){qp->mem + r.rq_offset, r.max_recv_wr, r.recv_entry};
		qp->rq.max_sge = r.max_recv_sge;
	}
	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	/* rxe (rxe_qp_init_req) grants as inline data the larger of what was asked and the
	 * room of the send SGEs, 16 bytes each: rdma_xclient posts 16 bytes inline on a QP
	 * that asked for none and one SGE. */
	uint32_t inl = k->max_inline_data, sge_room = k->max_send_sge * (uint32_t)sizeof(struct ibv_sge);
	if (inl < sge_room)
		inl = sge_room < RL_MAX_INLINE ? sge_room : RL_MAX_INLINE;
	if (xrc_recv)
		inl = 0; /* no send queue */
	if ((err = setup_inline(qp, p, inl))) {
		ibv_destroy_qp(&qp->qpx.qp_base);
		return fail_null(err);
	}
	struct ibv_qp *q = &qp->qpx.qp_base;
	q->context = c;
	q->qp_context = attr->qp_context;
	q->pd = p;
	q->send_cq = attr->send_cq;
	q->recv_cq = attr->recv_cq;
	q->srq = attr->srq;
	q->handle = r.handle;
	q->qp_num = r.qpn;
	q->state = IBV_QPS_RESET;
	q->qp_type = attr->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	qp->cap = (struct ibv_qp_cap){.max_send_wr = xrc_recv ? 0 : r.max_send_wr, .max_recv_wr = srq ? 0 : r.max_recv_wr,
				      .max_send_sge = r.max_send_sge, .max_recv_sge = srq ? 0 : r.max_recv_sge,
				      .max_inline_data = inl};
	qp->sig_all = attr->sq_sig_all;
	caller->cap = qp->cap;
	qp->qpx.comp_mask = send_ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0;
	rl_qp_ex_init(qp);
	if ((err = rl_register(ctx, r.handle, q))) {
		ibv_destroy_qp(q);
		return fail_null(err);
	}
	rl_fatal_track_qp(ctx, qp);
	return q;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	return create_qp(pd->context, pd, NULL, attr, 0);
}

struct ibv_qp *rl_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ex)
{
	const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
			     IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			     IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
	if (ex->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					IBV_QP_INIT_ATTR_CREATE_FLAGS)) {
		rl_unsupported("ibv_create_qp_ex with attributes beyond a PD, an XRCD, create flags and send ops flags");
		return NULL;
	}
	/* rxe supports no creation flag (rxe_create_qp: EOPNOTSUPP for any), so the mask bit
	 * with flags 0 is the only accepted use. */
	if ((ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ex->create_flags)
		return fail_null(EOPNOTSUPP);
	/* an XRC_RECV QP lives in an XRC domain, any other in a PD */
	struct rl_xrcd *xrcd = ex->comp_mask & IBV_QP_INIT_ATTR_XRCD ? (struct rl_xrcd *)ex->xrcd : NULL;
	struct ibv_pd *pd = ex->comp_mask & IBV_QP_INIT_ATTR_PD ? ex->pd : NULL;
	if (ex->qp_type == IBV_QPT_XRC_RECV ? !xrcd || xrcd->xrcd.context != c : !pd || pd->context != c)
		return fail_null(EINVAL);
	uint64_t send_ops = ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS ? ex->send_ops_flags : 0;
	if (send_ops & ~ops) {
		rl_unsupported("ibv_create_qp_ex with send ops beyond RDMA, SEND, atomics, bind MW and local invalidate (TSO)");
		return NULL;
	}
	struct ibv_qp_init_attr a = {.qp_context = ex->qp_context, .send_cq = ex->send_cq, .recv_cq = ex->recv_cq,
				     .srq = ex->srq, .cap = ex->cap, .qp_type = ex->qp_type, .sq_sig_all = ex->sq_sig_all};
	struct ibv_qp *qp = create_qp(c, ex->qp_type == IBV_QPT_XRC_RECV ? NULL : pd, xrcd, &a, send_ops ? send_ops : 1);
	if (qp)
		ex->cap = a.cap;
	return qp;
}

/* ibv_open_qp: a handle of an XRC_RECV QP another process created in a domain this
 * one opened too. It has no rings: it can be modified, queried and destroyed. */
struct ibv_qp *rl_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	if (attr->comp_mask & ~(need | IBV_QP_OPEN_ATTR_CONTEXT))
		return fail_null(EOPNOTSUPP);
	if ((attr->comp_mask & need) != need || !attr->xrcd || attr->xrcd->context != c ||
	    attr->qp_type != IBV_QPT_XRC_RECV)
		return fail_null(EINVAL);
	struct rl_context *ctx = ctx_of(c);
	struct rl_open_qp req = {.xrcd = ((struct rl_xrcd *)attr->xrcd)->h, .qpn = attr->qp_num};
	struct rl_qp_resp r;
	struct rl_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return fail_null(ENOMEM);
	int err = rl_call(ctx, RL_OP_OPEN_QP, &req, sizeof(req), &r, sizeof(r), -1, NULL, 0);
	if (err) {
		free(qp);
		return fail_null(err);
	}
	qp->h = r.handle;
	struct ibv_qp *q = &qp->qpx.qp_base;
	q->context = c;
	q->qp_context = attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT ? attr->qp_context : NULL;
	q->handle = r.handle;
	q->qp_num = r.qpn;
	q->state = IBV_QPS_RESET; /* until ibv_query_qp asks */
	q->qp_type = IBV_QPT_XRC_RECV;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	rl_qp_ex_init(qp);
	if ((err = rl_register(ctx, r.handle, q))) {
		ibv_destroy_qp(q);
		return fail_null(err);
	}
	return q;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *q)
{
	struct rl_qp *qp = (struct rl_qp *)q;
	return qp->qpx.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS ? &qp->qpx : NULL;
}

/* clean_cqs drops q's completions not yet polled, as rdma-core's providers do when a
 * QP is destroyed or reset; an XRC QP lacks one or both CQs. */
static void clean_cqs(struct ibv_qp *q)
{
	if (q->recv_cq)
		rl_cq_clean(q->recv_cq, q->qp_num);
	if (q->send_cq && q->send_cq != q->recv_cq)
		rl_cq_clean(q->send_cq, q->qp_num);
}

int ibv_destroy_qp(struct ibv_qp *q)
{
	struct rl_qp *qp = (struct rl_qp *)q;
	struct rl_handle h = {qp->h};
	int err = rl_call(ctx_of(q->context), RL_OP_DESTROY_QP, &h, sizeof(h), NULL, 0, -1, NULL, 0);
	if (err)
		return err;
	rl_fatal_untrack_qp(ctx_of(q->context), qp);
	rl_unregister(ctx_of(q->context), qp->h);
	clean_cqs(q);
	if (qp->inline_mr)
		ibv_dereg_mr(qp->inline_mr);
	if (qp->mem) /* an opened XRC_RECV QP has no rings */
		munmap(qp->mem, qp->size);
	free(qp);
	return 0;
}

/* Attribute mask bits the service takes (qp.AttrMask): ibverbs' own up to DEST_QPN. */
#define RL_QP_KNOWN_MASK ((1u << 21) - 1)

int ibv_modify_qp(struct ibv_qp *q, struct ibv_qp_attr *attr, int mask)
{
	struct rl_qp *qp = (struct rl_qp *)q;
	struct rl_context *ctx = ctx_of(q->context);
	if ((unsigned)mask & ~RL_QP_KNOWN_MASK) {
		rl_unsupported("ibv_modify_qp with attributes beyond IBV_QP_DEST_QPN (rate limit)");
		return EOPNOTSUPP;
	}
	if (mask & IBV_QP_ALT_PATH) {
		rl_unsupported("ibv_modify_qp(IBV_QP_ALT_PATH) (automatic path migration)");
		return EOPNOTSUPP;
	}
	struct rl_modify_qp m = {.handle = qp->h, .mask = mask & ~IBV_QP_CAP};
	struct rl_qp_attr *w = &m.attr;
	w->state = attr->qp_state;
	w->cur_state = attr->cur_qp_state;
	w->en_sqd_async_notify = attr->en_sqd_async_notify;
	w->port = attr->port_num;
	w->access_flags = attr->qp_access_flags;
	w->pkey_index = attr->pkey_index;
	w->qkey = attr->qkey;
	w->timeout = attr->timeout;
	w->retry_cnt = attr->retry_cnt;
	w->rnr_retry = attr->rnr_retry;
	w->max_rd_atomic = attr->max_rd_atomic;
	w->min_rnr_timer = attr->min_rnr_timer;
	w->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	w->path_mig_state = attr->path_mig_state;
	w->rq_psn = attr->rq_psn;
	w->sq_psn = attr->sq_psn;
	w->dest_qpn = attr->dest_qp_num;
	if (mask & IBV_QP_PATH_MTU) {
		w->path_mtu = rl_mtu_bytes(attr->path_mtu);
		if (!w->path_mtu)
			return fail(EINVAL);
	}
	if (mask & IBV_QP_AV) {
		struct ibv_ah_attr *ah = &attr->ah_attr;
		if (!ah->is_global || ah->grh.sgid_index >= ctx->ngids)
			return fail(EINVAL); /* RoCE addresses by GID: rxe refuses an AV without GRH */
		memcpy(w->dgid, ah->grh.dgid.raw, 16);
		memcpy(w->sgid, ctx->gids[ah->grh.sgid_index].raw, 16);
		w->traffic_class = ah->grh.traffic_class;
		w->hop_limit = ah->grh.hop_limit;
		w->flow_label = ah->grh.flow_label;
	}
	int err = rl_call(ctx, RL_OP_MODIFY_QP, &m, sizeof(m), NULL, 0, -1, NULL, 0);
	if (!err && (mask & IBV_QP_STATE)) {
		q->state = attr->qp_state;
		if (attr->qp_state == IBV_QPS_RESET && qp->sq.ring.mem) { /* the service emptied the rings */
			clean_cqs(q);
			qp->sq.prod = __atomic_load_n((uint32_t *)(qp->sq.ring.mem + RL_RING_PROD), __ATOMIC_ACQUIRE);
			if (qp->rq.ring.mem)
				qp->rq.prod = __atomic_load_n((uint32_t *)(qp->rq.ring.mem + RL_RING_PROD), __ATOMIC_ACQUIRE);
		}
	}
	return err;
}

void rocelab_qp_attr(struct ibv_context *c, const struct rl_qp_attr *w, struct ibv_qp_attr *attr)
{
	struct rl_context *ctx = ctx_of(c);
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = w->state;
	attr->cur_qp_state = w->state;
	attr->path_mtu = rl_mtu_enum(w->path_mtu);
	attr->path_mig_state = w->path_mig_state;
	attr->qkey = w->qkey;
	attr->rq_psn = w->rq_psn;
	attr->sq_psn = w->sq_psn;
	attr->dest_qp_num = w->dest_qpn;
	attr->qp_access_flags = w->access_flags;
	attr->ah_attr.is_global = 1;
	attr->ah_attr.port_num = w->port;
	memcpy(attr->ah_attr.grh.dgid.raw, w->dgid, 16);
	int sgid = rl_gid_index(ctx, (const union ibv_gid *)w->sgid);
	attr->ah_attr.grh.sgid_index = sgid < 0 ? 0 : sgid;
	attr->ah_attr.grh.traffic_class = w->traffic_class;
	attr->ah_attr.grh.hop_limit = w->hop_limit;
	attr->ah_attr.grh.flow_label = w->flow_label;
	attr->pkey_index = w->pkey_index;
	attr->en_sqd_async_notify = w->en_sqd_async_notify;
	attr->max_rd_atomic = w->max_rd_atomic;
	attr->max_dest_rd_atomic = w->max_dest_rd_atomic;
	attr->min_rnr_timer = w->min_rnr_timer;
	attr->port_num = w->port;
	attr->timeout = w->timeout;
	attr->retry_cnt = w->retry_cnt;
	attr->rnr_retry = w->rnr_retry;
}

int ibv_query_qp(struct ibv_qp *q, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct rl_qp *qp = (struct rl_qp *)q;
	struct rl_context *ctx = ctx_of(q->context);
	(void)mask; /* everything is reported, as providers do */
	struct rl_handle h = {qp->h};
	struct rl_qp_attr w;
	int err = rl_call(ctx, RL_OP_QUERY_QP, &h, sizeof(h), &w, sizeof(w), -1, NULL, 0);
	if (err)
		return err;
	rocelab_qp_attr(q->context, &w, attr);
	attr->cap = qp->cap;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = q->qp_context;
		init->send_cq = q->send_cq;
		init->recv_cq = q->recv_cq;
		init->srq = q->srq;
		init->cap = qp->cap;
		init->qp_type = q->qp_type;
		init->sq_sig_all = qp->sig_all;
	}
	q->state = w.state;
	return 0;
}

/* ---- asynchronous events ---- */

int rl_register(struct rl_context *ctx, uint32_t h, void *obj)
{
	pthread_mutex_lock(&ctx->objs_mu);
	if (ctx->nobjs == ctx->capobjs) {
		size_t cap = ctx->capobjs ? 2 * ctx->capobjs : 16;
		struct rl_object *o = realloc(ctx->objs, cap * sizeof(*o));
		if (!o) {
			pthread_mutex_unlock(&ctx->objs_mu);
			return ENOMEM;
		}
		ctx->objs = o;
		ctx->capobjs = cap;
	}
	ctx->objs[ctx->nobjs++] = (struct rl_object){.h = h, .obj = obj};
	pthread_mutex_unlock(&ctx->objs_mu);
	return 0;
}

void rl_unregister(struct rl_context *ctx, uint32_t h)
{
	pthread_mutex_lock(&ctx->objs_mu);
	for (size_t i = 0; i < ctx->nobjs; i++)
		if (ctx->objs[i].h == h) {
			ctx->objs[i] = ctx->objs[--ctx->nobjs];
			break;
		}
	pthread_mutex_unlock(&ctx->objs_mu);
}

static void *registered(struct rl_context *ctx, uint32_t h)
{
	void *obj = NULL;
	pthread_mutex_lock(&ctx->objs_mu);
	for (size_t i = 0; i < ctx->nobjs && !obj; i++)
		if (ctx->objs[i].h == h)
			obj = ctx->objs[i].obj;
	pthread_mutex_unlock(&ctx->objs_mu);
	return obj;
}

/* ibv_get_async_event takes one token from the async fd (blocking, or EAGAIN when
 * the application made it non-blocking), then the service's oldest event. An event
 * of an object destroyed while it was queued is dropped with it. */
int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *event)
{
	struct rl_context *ctx = ctx_of(c);
	for (;;) {
		int fatal = rl_fatal_async_event(ctx, event);
		if (fatal)
			return fatal > 0 ? 0 : -1;
		uint64_t v;
		ssize_t n;
		while ((n = read(c->async_fd, &v, sizeof(v))) < 0 && errno == EINTR)
			;
		if (n < 0)
			return -1;
		struct rl_async_event e;
		int err = rl_call(ctx, RL_OP_GET_ASYNC_EVENT, NULL, 0, &e, sizeof(e), -1, NULL, 0);
		if (err && rl_dead(ctx))
			continue; /* gone while we waited: DEVICE_FATAL */
		if (err)
			return -1;
		void *obj = registered(ctx, e.handle);
		if (!obj)
			continue;
		memset(event, 0, sizeof(*event));
		event->event_type = e.type;
		switch (e.type) {
		case IBV_EVENT_CQ_ERR:
			event->element.cq = obj;
			break;
		case IBV_EVENT_SRQ_ERR:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			event->element.srq = obj;
			break;
		default:
			event->element.qp = obj;
		}
		return 0;
	}
}

/* ibv_ack_async_event has nothing to release: libibverbs counts acknowledgements so
 * that destroying an object can wait for its events, but here an object's queued
 * events go with it (ibv_get_async_event drops them), so there is nothing to wait
 * for. */
void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

/* ---- fork ---- */

int ibv_fork_init(void)
{
	return 0; /* registered pages are MADV_DONTFORK always (memory.c) */
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_ENABLED;
}

int ibv_dontfork_range(void *base, size_t size)
{
	return madvise(base, size, MADV_DONTFORK) ? errno : 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	return madvise(base, size, MADV_DOFORK) ? errno : 0;
}

/* ibv_attach_mcast and ibv_detach_mcast: RoCE has no LIDs, so lid is ignored, as rxe
 * does; the device keeps the group list and checks the QP (UD) and the GID (multicast). */
static int mcast(struct ibv_qp *q, const union ibv_gid *gid, int op)
{
	if (!q || !gid)
		return fail(EINVAL);
	struct rl_mcast m = {.handle = ((struct rl_qp *)q)->h};
	memcpy(m.gid, gid->raw, sizeof(m.gid));
	return rl_call(ctx_of(q->context), op, &m, sizeof(m), NULL, 0, -1, NULL, 0);
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast(qp, gid, RL_OP_ATTACH_MCAST);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast(qp, gid, RL_OP_DETACH_MCAST);
}
