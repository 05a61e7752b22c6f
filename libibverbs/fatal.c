/*
 * When the RNIC goes away — the lab process died, or closed the connection — the
 * application learns it as it would from a kernel device that hit a fatal error and was
 * disassociated: a thread per context watches the verbs socket for its hang-up and then
 * wakes whoever waits, ibv_get_async_event gives IBV_EVENT_DEVICE_FATAL once and EIO
 * after, ibv_get_cq_event EIO once its queued events are taken, control calls EIO
 * (destroys succeed, as rdma-core treats EIO from a disassociated device, so that an
 * application can clean up), and ibv_poll_cq, after the completions already in the ring,
 * one IBV_WC_FATAL_ERR completion per work request still outstanding. docs/libibverbs.md.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "private.h"
#include "rocelab.h"

/* A QP's flush cursors: the next outstanding send and receive slot to complete. */
struct rl_fatal_qp {
	struct rl_qp *qp;
	int started;
	uint32_t sq_next, rq_next;
};

struct rl_fatal {
	pthread_t thread;
	int stop_fd;
	int dead;	   /* atomic */
	int fatal_told;	   /* atomic: DEVICE_FATAL was returned */
	pthread_mutex_t mu; /* the lists below */
	struct rl_fatal_qp *qps;
	size_t nqps, capqps;
	int *fds; /* eventfds woken when the RNIC goes: completion and RDMA-CM channels */
	size_t nfds, capfds;
};

int rl_dead(struct rl_context *ctx)
{
	return ctx->fatal && __atomic_load_n(&ctx->fatal->dead, __ATOMIC_ACQUIRE);
}

static const uint64_t one = 1;

/* rl_fatal_mark records that the RNIC is gone and wakes every waiter: the async fd and
 * every tracked fd (completion and RDMA-CM channels). Once. */
void rl_fatal_mark(struct rl_context *ctx)
{
	struct rl_fatal *f = ctx->fatal;
	if (!f || __atomic_exchange_n(&f->dead, 1, __ATOMIC_ACQ_REL))
		return;
	(void)!write(ctx->vctx.context.async_fd, &one, sizeof(one));
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nfds; i++)
		(void)!write(f->fds[i], &one, sizeof(one));
	pthread_mutex_unlock(&f->mu);
}

static void *watch(void *arg)
{
	struct rl_context *ctx = arg;
	struct pollfd p[2] = {{.fd = ctx->sock, .events = POLLRDHUP}, {.fd = ctx->fatal->stop_fd, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[1].revents)
			return NULL; /* ibv_close_device */
		if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) { /* NVAL: a failed call closed it */
			rl_fatal_mark(ctx);
			return NULL;
		}
	}
}

void rl_fatal_start(struct rl_context *ctx)
{
	struct rl_fatal *f = calloc(1, sizeof(*f));
	if (!f)
		return; /* the device works; only its loss goes unnoticed */
	f->stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&f->mu, NULL);
	ctx->fatal = f;
	if (f->stop_fd < 0 || pthread_create(&f->thread, NULL, watch, ctx)) {
		if (f->stop_fd >= 0)
			close(f->stop_fd);
		free(f);
		ctx->fatal = NULL;
	}
}

void rl_fatal_stop(struct rl_context *ctx)
{
	struct rl_fatal *f = ctx->fatal;
	if (!f)
		return;
	(void)!write(f->stop_fd, &one, sizeof(one));
	pthread_join(f->thread, NULL);
	close(f->stop_fd);
	free(f->qps);
	free(f->fds);
	free(f);
	ctx->fatal = NULL;
}

/* rl_fatal_errno is a control call's error once the RNIC may be gone: ENODEV (the
 * socket failed) marks it gone; then destroys succeed and every other call is EIO. */
int rl_fatal_errno(struct rl_context *ctx, uint16_t op, int err)
{
	if (err == ENODEV)
		rl_fatal_mark(ctx);
	if (!rl_dead(ctx) || (err && err != ENODEV))
		return err;
	switch (op) {
	case RL_OP_DEALLOC_PD:
	case RL_OP_DEREG_MR:
	case RL_OP_DESTROY_COMP_CHANNEL:
	case RL_OP_DESTROY_CQ:
	case RL_OP_DESTROY_SRQ:
	case RL_OP_DESTROY_AH:
	case RL_OP_DESTROY_QP:
		return 0;
	}
	return EIO;
}

/* rl_fatal_async_event: 0 while the RNIC is there; once it is gone, 1 with
 * IBV_EVENT_DEVICE_FATAL in event the first time, -1 with errno EIO after. */
int rl_fatal_async_event(struct rl_context *ctx, struct ibv_async_event *event)
{
	if (!rl_dead(ctx))
		return 0;
	if (__atomic_exchange_n(&ctx->fatal->fatal_told, 1, __ATOMIC_ACQ_REL)) {
		errno = EIO;
		return -1;
	}
	memset(event, 0, sizeof(*event));
	event->event_type = IBV_EVENT_DEVICE_FATAL;
	event->element.port_num = 1;
	return 1;
}

void rl_fatal_track_qp(struct rl_context *ctx, struct rl_qp *qp)
{
	struct rl_fatal *f = ctx->fatal;
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	if (f->nqps == f->capqps) {
		size_t cap = f->capqps ? 2 * f->capqps : 16;
		struct rl_fatal_qp *q = realloc(f->qps, cap * sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&f->mu);
			return; /* its outstanding work will not be flushed */
		}
		f->qps = q;
		f->capqps = cap;
	}
	f->qps[f->nqps++] = (struct rl_fatal_qp){.qp = qp};
	pthread_mutex_unlock(&f->mu);
}

void rl_fatal_untrack_qp(struct rl_context *ctx, struct rl_qp *qp)
{
	struct rl_fatal *f = ctx->fatal;
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nqps; i++)
		if (f->qps[i].qp == qp) {
			f->qps[i] = f->qps[--f->nqps];
			break;
		}
	pthread_mutex_unlock(&f->mu);
}

void rl_fatal_track_fd(struct rl_context *ctx, int fd)
{
	struct rl_fatal *f = ctx->fatal;
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	if (f->nfds == f->capfds) {
		size_t cap = f->capfds ? 2 * f->capfds : 8;
		int *fds = realloc(f->fds, cap * sizeof(*fds));
		if (!fds) {
			pthread_mutex_unlock(&f->mu);
			return;
		}
		f->fds = fds;
		f->capfds = cap;
	}
	f->fds[f->nfds++] = fd;
	pthread_mutex_unlock(&f->mu);
	if (rl_dead(ctx)) /* gone already: its waiter must not block */
		(void)!write(fd, &one, sizeof(one));
}

void rl_fatal_untrack_fd(struct rl_context *ctx, int fd)
{
	struct rl_fatal *f = ctx->fatal;
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nfds; i++)
		if (f->fds[i] == fd) {
			f->fds[i] = f->fds[--f->nfds];
			break;
		}
	pthread_mutex_unlock(&f->mu);
}

/* rocelab_watch_fd and rocelab_device_gone are librdmacm's view of the loss (private.h). */
void rocelab_watch_fd(struct ibv_context *context, int fd, int watch)
{
	if (watch)
		rl_fatal_track_fd(rl_ctx(context), fd);
	else
		rl_fatal_untrack_fd(rl_ctx(context), fd);
}

int rocelab_device_gone(struct ibv_context *context) { return rl_dead(rl_ctx(context)); }

static uint64_t slot_wr_id(const struct rl_ring *r, uint32_t k)
{
	uint64_t id;
	memcpy(&id, r->mem + RL_RING_HEADER + (size_t)(k & (r->cap - 1)) * r->entry, sizeof(id));
	return id;
}

/* rl_fatal_flush writes up to n IBV_WC_FATAL_ERR completions for the work requests
 * still outstanding on cq's QPs (the slots the service had not freed when it went, to
 * what the application posted) and returns how many. */
int rl_fatal_flush(struct rl_cq *cq, int n, struct ibv_wc *wc)
{
	struct rl_context *ctx = rl_ctx(cq->cq.context);
	struct rl_fatal *f = ctx->fatal;
	int got = 0;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nqps && got < n; i++) {
		struct rl_fatal_qp *q = &f->qps[i];
		struct ibv_qp *b = &q->qp->qpx.qp_base;
		if (!q->started) {
			q->sq_next = __atomic_load_n((uint32_t *)(q->qp->sq.ring.mem + RL_RING_CONS), __ATOMIC_ACQUIRE);
			if (q->qp->rq.ring.mem)
				q->rq_next = __atomic_load_n((uint32_t *)(q->qp->rq.ring.mem + RL_RING_CONS), __ATOMIC_ACQUIRE);
			q->started = 1;
		}
		struct {
			struct ibv_cq *cq;
			struct rl_wq *w;
			uint32_t *next;
			enum ibv_wc_opcode op;
		} sides[2] = {{b->send_cq, &q->qp->sq, &q->sq_next, IBV_WC_SEND},
			      {b->recv_cq, &q->qp->rq, &q->rq_next, IBV_WC_RECV}};
		for (int s = 0; s < 2; s++) {
			if (sides[s].cq != (struct ibv_cq *)&cq->cq || !sides[s].w->ring.mem)
				continue;
			uint32_t prod = __atomic_load_n(&sides[s].w->prod, __ATOMIC_ACQUIRE);
			for (; *sides[s].next != prod && got < n; ++*sides[s].next) {
				memset(&wc[got], 0, sizeof(wc[got]));
				wc[got].wr_id = slot_wr_id(&sides[s].w->ring, *sides[s].next);
				wc[got].status = IBV_WC_FATAL_ERR;
				wc[got].opcode = sides[s].op;
				wc[got].qp_num = b->qp_num;
				got++;
			}
		}
	}
	pthread_mutex_unlock(&f->mu);
	return got;
}
