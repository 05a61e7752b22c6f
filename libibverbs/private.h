/*
 * What rocelab's libibverbs.so.1 exports to rocelab's librdmacm.so.1 (version node
 * ROCELAB_PRIVATE, libibverbs.map): the RDMA-CM calls of the verbs service go on the
 * application's own connection, because they name its QPs by their handles there.
 */
#ifndef ROCELAB_PRIVATE_H
#define ROCELAB_PRIVATE_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

/* One control call on context's connection (docs/verbs-service.md), passing sendfd
 * (or -1) with SCM_RIGHTS: 0, or an errno value (also stored in errno). */
int rocelab_call(struct ibv_context *context, uint16_t op, const void *req, size_t reqlen, void *resp,
		 size_t resplen, int sendfd);

/* qp's handle on its context's connection. */
uint32_t rocelab_qp_handle(struct ibv_qp *qp);

struct rl_qp_attr;

/* rocelab_qp_attr converts the service's QP attributes (wire.h's struct rl_qp_attr,
 * as QUERY_QP and CM_INIT_QP_ATTR answer) to ibv_qp_attr on context's GID table. */
void rocelab_qp_attr(struct ibv_context *context, const struct rl_qp_attr *w, struct ibv_qp_attr *attr);

/* rocelab_watch_fd adds (watch 1) or removes (0) the eventfd fd from those written to
 * when context's RNIC goes away (the lab process died or closed the connection), so that
 * a waiter on it wakes; rocelab_device_gone tells whether it has gone. */
void rocelab_watch_fd(struct ibv_context *context, int fd, int watch);
int rocelab_device_gone(struct ibv_context *context);

#endif
