/*
 * The verbs service's RDMA-CM calls (package rnic/service/wire, cm.go;
 * docs/verbs-service.md, ops 0x40-0x4B) as C structs, for the drop-in librdmacm.so.1
 * (cma.c, docs/rdmacm.md). Same rules as libibverbs/wire.h: packed little-endian
 * structs are the encoding; TestCMCEncodings (rnic/service/wire/c_test.go) checks
 * them against the Go encoder.
 */
#ifndef ROCELAB_WIRE_CM_H
#define ROCELAB_WIRE_CM_H

#include "../libibverbs/wire.h"

enum rl_cm_op {
	RL_OP_CM_CREATE_CHANNEL = 0x40, /* carries the channel's eventfd */
	RL_OP_CM_DESTROY_CHANNEL = 0x41,
	RL_OP_CM_CREATE_ID = 0x42,
	RL_OP_CM_DESTROY_ID = 0x43,
	RL_OP_CM_LISTEN = 0x44,
	RL_OP_CM_RESOLVE_ADDR = 0x45,
	RL_OP_CM_RESOLVE_ROUTE = 0x46,
	RL_OP_CM_CONNECT = 0x47,
	RL_OP_CM_ACCEPT = 0x48,
	RL_OP_CM_REJECT = 0x49,
	RL_OP_CM_DISCONNECT = 0x4A,
	RL_OP_CM_GET_EVENT = 0x4B, /* RL_CODE_NOT_FOUND: no event pending */
	RL_OP_CM_INIT_QP_ATTR = 0x4C,
	RL_OP_CM_ESTABLISH = 0x4D,
	RL_OP_CM_SET_OPTION = 0x4E,
	RL_OP_CM_BIND = 0x4F, /* answered by the struct rl_cm_addr the identifier got */
	RL_OP_CM_MIGRATE_ID = 0x50,
};

/* An IP address (IPv4 mapped into IPv6; all zero = unspecified) and port. */
struct RL_PACKED rl_cm_addr {
	uint8_t addr[16];
	uint16_t port, pad;
};

struct RL_PACKED rl_cm_create_id {
	uint32_t channel;
	uint16_t port_space; /* RDMA_PS_TCP (0x0106), RDMA_PS_UDP (0x0111) or RDMA_PS_IB (0x013F) */
	uint8_t qp_type, pad; /* enum ibv_qp_type (RC, UD); 0: the port space's */
};

struct RL_PACKED rl_cm_bind {
	uint32_t id;
	struct rl_cm_addr addr;
};

struct RL_PACKED rl_cm_migrate_id {
	uint32_t id, channel;
};

struct RL_PACKED rl_cm_listen {
	uint32_t id, backlog;
	struct rl_cm_addr addr;
};

struct RL_PACKED rl_cm_resolve_addr {
	uint32_t id, timeout_ms;
	struct rl_cm_addr src, dst;
};

struct RL_PACKED rl_cm_conn_param {
	uint8_t responder_resources, initiator_depth, retry_count, rnr_retry_count;
	uint8_t private_data_len, pad[3];
	uint8_t private_data[196];
};

/* RL_OP_CM_CONNECT and RL_OP_CM_ACCEPT: qp 0 = the application moves QP qpn itself */
struct RL_PACKED rl_cm_connect {
	uint32_t id, qp, qpn;
	struct rl_cm_conn_param param;
};

struct RL_PACKED rl_cm_init_qp_attr {
	uint32_t id, state; /* enum ibv_qp_state */
};

/* The response to RL_OP_CM_INIT_QP_ATTR. */
struct RL_PACKED rl_cm_qp_attr {
	uint32_t mask; /* enum ibv_qp_attr_mask */
	struct rl_qp_attr attr;
};

/* RDMA_OPTION_ID_TOS (0), RDMA_OPTION_ID_REUSEADDR (1) and RDMA_OPTION_ID_ACK_TIMEOUT (3) */
struct RL_PACKED rl_cm_set_option {
	uint32_t id, option, value;
};

struct RL_PACKED rl_cm_reject {
	uint32_t id;
	uint8_t private_data_len, pad[3];
	uint8_t private_data[148];
};

/* The response to RL_OP_CM_GET_EVENT (whose request body is the channel's handle). */
struct RL_PACKED rl_cm_event {
	uint8_t type, pad[3]; /* enum rdma_cm_event_type */
	int32_t status;       /* negative errno, or a REJ's reason */
	uint32_t id, listener;
	struct rl_cm_addr local, remote;
	uint32_t qpn; /* the peer's QP: the REQ's, REP's or SIDR_REP's */
	struct rl_cm_conn_param param;
	uint32_t qkey, flow_label; /* RDMA_PS_UDP's ESTABLISHED: the SIDR_REP's Q_Key, the path's flow label */
};

_Static_assert(sizeof(struct rl_cm_addr) == 20, "cm addr");
_Static_assert(sizeof(struct rl_cm_conn_param) == 204, "cm conn param");
_Static_assert(sizeof(struct rl_cm_event) == 272, "cm event");

#endif
