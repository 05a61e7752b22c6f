/*
 * rocelab's libibverbs.so.1: the internal types. Each ibverbs object is the public
 * struct (first member, so the application's pointer is ours) followed by what the
 * verbs service's protocol needs: the object's handle on the connection and, for
 * queues, the ring in memory shared with the lab process. docs/libibverbs.md.
 */
#ifndef ROCELAB_VERBS_H
#define ROCELAB_VERBS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "wire.h"

/* The one device the library shows: the soft-RNIC of the lab host it runs in. */
#define RL_DEVICE_NAME "rocelab0"
/* Inline data up to this many bytes per send WQE (IBV_SEND_INLINE). */
#define RL_MAX_INLINE 512

struct rl_device {
	struct ibv_device dev;
	/* libmlx5/libefa's helpers look past ibv_device (struct verbs_device) to tell
	 * their own devices: zeros there mean "not ours". */
	char verbs_device_tail[256];
	struct sockaddr_un addr;
	socklen_t addrlen;
	uint64_t node_guid; /* host order */
};

struct rl_ring {
	uint8_t *mem;
	uint32_t cap, entry;
};

struct rl_context {
	struct verbs_context vctx;
	int sock;
	pthread_mutex_t call_mu; /* one control call at a time */
	uint32_t seq;
	int bell_fd;
	uint8_t *page; /* doorbell page */
	struct rl_device_attr dattr;
	struct rl_port_attr pattr;
	uint32_t ngids;
	union ibv_gid *gids; /* the GID table, read at open */
	/* The CQs, SRQs and QPs by handle, for asynchronous events to name them. */
	pthread_mutex_t objs_mu;
	struct rl_object *objs;
	size_t nobjs, capobjs;
	struct rl_fatal *fatal; /* the watch for the RNIC's loss (fatal.c) */
};

struct rl_object {
	uint32_t h;
	void *obj; /* struct ibv_cq, ibv_srq or ibv_qp */
};

struct rl_pd {
	struct ibv_pd pd;
	uint32_t h;
};

struct rl_mr {
	struct ibv_mr mr;
	uint32_t h;
};

struct rl_mw {
	struct ibv_mw mw;
	uint32_t h;
};

struct rl_cq;

struct rl_channel {
	struct ibv_comp_channel ch;
	uint32_t h;
	pthread_mutex_t mu;
	struct rl_cq *cqs; /* the CQs bound to it */
};

struct rl_cq {
	struct ibv_cq_ex cq; /* begins like struct ibv_cq */
	uint32_t h;
	struct rl_ring ring;
	size_t size;
	pthread_spinlock_t lock;
	uint32_t cons;
	uint32_t seen; /* events returned by ibv_get_cq_event (under the channel's mu) */
	struct rl_channel *chan;
	struct rl_cq *next; /* in chan->cqs */
	struct rl_cqe cur; /* the completion the ibv_cq_ex readers look at */
};

struct rl_wq {
	struct rl_ring ring;
	uint32_t prod;
	uint32_t max_sge;
	pthread_spinlock_t lock;
};

struct rl_srq {
	struct ibv_srq srq;
	uint32_t h;
	struct rl_wq rq;
	size_t size;
	uint32_t max_wr;
	uint32_t srqn; /* an XRC SRQ's number (ibv_get_srq_num); 0 for a basic SRQ */
};

struct rl_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t h;
};

struct rl_ah {
	struct ibv_ah ah;
	uint32_t h;
};

struct rl_qp {
	struct ibv_qp_ex qpx; /* begins with struct ibv_qp */
	uint32_t h;
	struct rl_wq sq, rq;
	uint8_t *mem;
	size_t size;
	struct ibv_qp_cap cap;
	int sig_all;
	/* IBV_SEND_INLINE: each send slot has max_inline bytes in a registered bounce
	 * buffer that the WQE points at instead of the caller's memory. */
	uint32_t max_inline;
	uint8_t *inline_buf;
	struct ibv_mr *inline_mr;
	/* the ibv_wr_* API: WQEs written from wr_start to wr_complete */
	uint32_t wr_first;
	int wr_err;
	struct rl_send_wqe *wr_cur;
};

#define rl_ctx(c) ((struct rl_context *)((char *)(c) - offsetof(struct verbs_context, context)))
#define rl_container(ptr, type) ((type *)(ptr))

/* control calls: 0 on success, else an errno value (also stored in errno) */
int rl_call(struct rl_context *ctx, uint16_t op, const void *req, size_t reqlen, void *resp,
	    size_t resplen, int sendfd, int *fds, int nfds);
int rl_errno_of(uint32_t code);
int rl_connect(const struct sockaddr_un *addr, socklen_t addrlen);
int rl_service_address(struct sockaddr_un *addr, socklen_t *len);

/* the handle registry of asynchronous events (objects.c) */
int rl_register(struct rl_context *ctx, uint32_t h, void *obj);
void rl_unregister(struct rl_context *ctx, uint32_t h);

/* the extended verbs' objects (objects.c), installed with the device's ops (device.c) */
struct ibv_cq_ex *rl_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *rl_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ex);
/* XRC (objects.c): the device's open_xrcd, close_xrcd, create_srq_ex, get_srq_num and
 * open_qp ops */
struct ibv_xrcd *rl_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr);
int rl_close_xrcd(struct ibv_xrcd *x);
struct ibv_srq *rl_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr);
int rl_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_qp *rl_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *attr);
/* memory windows (objects.c), the device's alloc_mw, dealloc_mw and bind_mw ops */
struct ibv_mw *rl_alloc_mw(struct ibv_pd *p, enum ibv_mw_type type);
int rl_dealloc_mw(struct ibv_mw *m);
int rl_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b);

/* memory */
int rl_share_range(uintptr_t start, uintptr_t end, int *fd);
void *rl_map(int fd, size_t size);

/* fast path */
void rl_doorbell(struct rl_context *ctx);
int rl_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int rl_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int rl_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int rl_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
/* rl_cq_clean drops the completions of QP qpn not yet polled from cq. */
void rl_cq_clean(struct ibv_cq *cq, uint32_t qpn);
int rl_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void rl_cq_ex_init(struct rl_cq *cq);
void rl_qp_ex_init(struct rl_qp *qp);

/* the RNIC's loss (fatal.c) */
void rl_fatal_start(struct rl_context *ctx);
void rl_fatal_stop(struct rl_context *ctx);
void rl_fatal_mark(struct rl_context *ctx);
int rl_dead(struct rl_context *ctx);
int rl_fatal_errno(struct rl_context *ctx, uint16_t op, int err);
int rl_fatal_async_event(struct rl_context *ctx, struct ibv_async_event *event);
int rl_fatal_flush(struct rl_cq *cq, int n, struct ibv_wc *wc);
void rl_fatal_track_qp(struct rl_context *ctx, struct rl_qp *qp);
void rl_fatal_untrack_qp(struct rl_context *ctx, struct rl_qp *qp);
void rl_fatal_track_fd(struct rl_context *ctx, int fd);
void rl_fatal_untrack_fd(struct rl_context *ctx, int fd);

/* unsupported: one line on stderr naming the verb (once), errno = EOPNOTSUPP */
void rl_unsupported(const char *verb);

/* conversions */
enum ibv_mtu rl_mtu_enum(uint32_t bytes);
/* rl_gid_index is the index of gid in the GID table, or -1. */
int rl_gid_index(struct rl_context *ctx, const union ibv_gid *gid);
uint32_t rl_mtu_bytes(enum ibv_mtu mtu);

#endif
