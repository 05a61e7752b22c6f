/*
 * The verbs service's protocol (package rnic/service/wire, docs/verbs-service.md) as C
 * structs. Every body is a fixed-size struct of little-endian fields in declaration
 * order without padding: packed structs on a little-endian machine are that encoding,
 * which TestCEncodings (rnic/service/wire/c_test.go, over libibverbs/test/wire_dump.c)
 * checks against the Go encoder.
 */
#ifndef ROCELAB_WIRE_H
#define ROCELAB_WIRE_H

#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the verbs service's wire format is little-endian; this library encodes it by layout"
#endif

#define RL_WIRE_VERSION 1
#define RL_MAX_MESSAGE 4096
#define RL_PAGE_SIZE 4096

enum rl_op {
	RL_OP_HELLO = 1,
	RL_OP_QUERY_DEVICE = 2,
	RL_OP_QUERY_PORT = 3,
	RL_OP_QUERY_GID = 4,
	RL_OP_ALLOC_PD = 5,
	RL_OP_DEALLOC_PD = 6,
	RL_OP_REG_MR = 7,
	RL_OP_DEREG_MR = 8,
	RL_OP_CREATE_COMP_CHANNEL = 9,
	RL_OP_DESTROY_COMP_CHANNEL = 10,
	RL_OP_CREATE_CQ = 11,
	RL_OP_DESTROY_CQ = 12,
	RL_OP_CREATE_SRQ = 13,
	RL_OP_MODIFY_SRQ = 14,
	RL_OP_DESTROY_SRQ = 15,
	RL_OP_CREATE_AH = 16,
	RL_OP_DESTROY_AH = 17,
	RL_OP_CREATE_QP = 18,
	RL_OP_MODIFY_QP = 19,
	RL_OP_QUERY_QP = 20,
	RL_OP_DESTROY_QP = 21,
	RL_OP_ASYNC_FD = 22,	    /* carries the eventfd the service increments per async event */
	RL_OP_GET_ASYNC_EVENT = 23, /* RL_CODE_NOT_FOUND: none pending */
	RL_OP_RESIZE_CQ = 24,	    /* rl_resize; answered by rl_ring_resp and the new ring's memfd */
	RL_OP_RESIZE_SRQ = 25,	    /* the same for an SRQ */
	RL_OP_REREG_MR = 26,
	RL_OP_ATTACH_MCAST = 27, /* rl_mcast */
	RL_OP_DETACH_MCAST = 28, /* rl_mcast */
	RL_OP_ALLOC_MW = 29,	/* rl_alloc_mw; answered by rl_mw_resp */
	RL_OP_DEALLOC_MW = 30,	/* rl_handle */
	RL_OP_OPEN_XRCD = 31,	/* rl_open_xrcd; answered by rl_handle */
	RL_OP_CLOSE_XRCD = 32,	/* rl_handle */
	RL_OP_CREATE_XRC_SRQ = 33, /* rl_create_xrc_srq; answered by rl_xrc_srq_resp and the ring's memfd */
	RL_OP_OPEN_QP = 34,	/* rl_open_qp; answered by rl_qp_resp, without rings */
};

/* Status codes of a response header (wire.Code). */
enum rl_code {
	RL_CODE_OK = 0,
	RL_CODE_INVALID_ARGUMENT = 1,
	RL_CODE_NO_MEMORY = 2,
	RL_CODE_BUSY = 3,
	RL_CODE_NOT_FOUND = 4,
	RL_CODE_UNRESOLVED = 5,
	RL_CODE_CLOSED = 6,
	RL_CODE_NOT_SUPPORTED = 7,
	RL_CODE_PERMISSION = 8,
	RL_CODE_PROTOCOL = 9,
	RL_CODE_TOO_MANY_FILES = 10, /* a descriptor budget of the lab is spent */
	RL_CODE_ADDR_IN_USE = 11,    /* the CM agent's ports (librdmacm) */
	RL_CODE_ADDR_NOT_AVAIL = 12, /* idem */
};

#define RL_PACKED __attribute__((packed))

struct RL_PACKED rl_header {
	uint16_t version;
	uint16_t op;
	uint32_t word; /* request: sequence number; response: status code */
};

struct RL_PACKED rl_hello {
	uint16_t min_version, max_version;
};

struct RL_PACKED rl_hello_resp {
	uint16_t version, pad0;
	uint32_t page_size, pid, pad1;
};

struct RL_PACKED rl_handle {
	uint32_t handle;
};

/* The response to RL_OP_GET_ASYNC_EVENT: an ibv_event_type and the handle of the CQ,
 * SRQ or QP it is about. */
struct RL_PACKED rl_async_event {
	uint32_t type, handle;
};

struct RL_PACKED rl_device_attr {
	uint64_t node_guid;
	uint32_t max_qp, max_qp_wr, max_sge, max_cqe;
	uint32_t max_qp_rd_atom, max_qp_init_rd_atom, phys_port_cnt, max_srq;
	char fw_ver[32];
	uint32_t max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach, pad;
};

/* RL_OP_ATTACH_MCAST and RL_OP_DETACH_MCAST: QP handle and the group's GID. */
struct RL_PACKED rl_mcast {
	uint32_t handle;
	uint8_t gid[16];
};

struct RL_PACKED rl_query_port {
	uint8_t port, pad[3];
};

struct RL_PACKED rl_port_attr {
	uint16_t max_mtu, active_mtu; /* bytes */
	uint32_t gid_table_len;
	uint32_t max_msg_sz, pad;
	uint64_t rate; /* bit/s */
	char state[16];
	char link_layer[16];
};

struct RL_PACKED rl_query_gid {
	uint32_t index;
};

struct RL_PACKED rl_gid {
	uint8_t gid[16];
};

struct RL_PACKED rl_reg_mr {
	uint32_t pd, access;
	uint64_t length, offset, addr;
};

struct RL_PACKED rl_mr_resp {
	uint32_t handle, lkey, rkey;
};

struct RL_PACKED rl_alloc_mw {
	uint32_t pd, type;
};

struct RL_PACKED rl_mw_resp {
	uint32_t handle, rkey;
};

struct RL_PACKED rl_create_cq {
	uint32_t cqe, channel;
};

struct RL_PACKED rl_ring_resp {
	uint32_t handle, cap, entry_size, pad;
	uint64_t size;
};

struct RL_PACKED rl_create_srq {
	uint32_t pd, max_wr, max_sge;
};

/* has_file 0: a private domain (fd -1); else the domain of the file dev/ino. */
struct RL_PACKED rl_open_xrcd {
	uint64_t dev, ino;
	uint32_t oflags, has_file;
};

struct RL_PACKED rl_create_xrc_srq {
	uint32_t pd, max_wr, max_sge, xrcd, cq, pad;
};

struct RL_PACKED rl_xrc_srq_resp {
	struct rl_ring_resp ring;
	uint32_t srqn, pad;
};

struct RL_PACKED rl_open_qp {
	uint32_t xrcd, qpn;
};

/* The new ring keeps the producer and consumer indices (entries copied to the same
 * index modulo the new capacity) and a CQ's event count. */
struct RL_PACKED rl_resize {
	uint32_t handle, entries;
};

struct RL_PACKED rl_rereg_mr {
	uint32_t handle, pd, access;
	uint16_t change_pd, change_access, pad0, pad1;
};

struct RL_PACKED rl_modify_srq {
	uint32_t handle, limit;
};

struct RL_PACKED rl_create_ah {
	uint32_t pd, sgid_index;
	uint8_t dgid[16];
	uint8_t traffic_class, hop_limit;
	uint16_t pad;
	uint32_t flow_label;
};

struct RL_PACKED rl_create_qp {
	uint32_t pd, send_cq, recv_cq, srq;
	uint8_t type, sig_all;
	uint16_t pad;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge;
};

struct RL_PACKED rl_qp_resp {
	uint32_t handle, qpn;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge;
	uint32_t send_entry, recv_entry;
	uint64_t sq_offset, rq_offset, size;
};

struct RL_PACKED rl_qp_attr {
	uint8_t state, cur_state, en_sqd_async_notify, port;
	uint32_t access_flags;
	uint16_t pkey_index;
	uint16_t path_mtu; /* bytes */
	uint32_t qkey;
	uint8_t dgid[16], sgid[16];
	uint8_t dst_mac[6], src_mac[6];
	uint8_t traffic_class, hop_limit;
	uint8_t timeout, retry_cnt, rnr_retry, max_rd_atomic;
	uint8_t min_rnr_timer, max_dest_rd_atomic, path_mig_state, pad;
	uint32_t flow_label;
	uint32_t rq_psn, sq_psn, dest_qpn;
};

struct RL_PACKED rl_modify_qp {
	uint32_t handle, mask;
	struct rl_qp_attr attr;
};

/* Rings in shared memory (wire.Ring): a 192-byte header, then Cap entries. */
#define RL_RING_HEADER 192
#define RL_RING_PROD 0
#define RL_RING_CONS 64
#define RL_RING_ARMED 128
#define RL_RING_QP_STATE 128 /* a send ring's: the QP's ibv_qp_state, written by the service */
#define RL_RING_EVENTS 132
#define RL_RING_ERROR 136

#define RL_RING_OK 0
#define RL_RING_OVERRUN 1

#define RL_DOORBELL_PENDING 0
#define RL_DOORBELL_AWAKE 64

struct RL_PACKED rl_send_wqe {
	uint64_t wr_id;
	uint8_t opcode, nsge;
	uint16_t zero;
	uint32_t flags;
	uint32_t imm; /* host order: the value the BTH's ImmDt carries */
	uint32_t rkey;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t ah;
	uint32_t remote_qpn; /* UD; XRC_SEND: the remote XRC SRQ number */
	uint32_t remote_qkey;
	uint32_t inv_rkey;
};

struct RL_PACKED rl_recv_wqe {
	uint64_t wr_id;
	uint32_t nsge, zero;
};

struct RL_PACKED rl_sge {
	uint64_t addr;
	uint32_t length, lkey;
};

struct RL_PACKED rl_cqe {
	uint64_t wr_id;
	uint8_t status, opcode;
	uint16_t pkey_index;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, flags;
	uint8_t sl; /* a RoCEv2 UD receive's L3 header type, as ConnectX reports it */
	uint8_t zero[27];
};

_Static_assert(sizeof(struct rl_header) == 8, "header");
_Static_assert(sizeof(struct rl_hello_resp) == 16, "hello response");
_Static_assert(sizeof(struct rl_device_attr) == 88, "device attr");
_Static_assert(sizeof(struct rl_mcast) == 20, "mcast");
_Static_assert(sizeof(struct rl_port_attr) == 56, "port attr");
_Static_assert(sizeof(struct rl_reg_mr) == 32, "reg mr");
_Static_assert(sizeof(struct rl_ring_resp) == 24, "ring response");
_Static_assert(sizeof(struct rl_create_ah) == 32, "create ah");
_Static_assert(sizeof(struct rl_create_qp) == 36, "create qp");
_Static_assert(sizeof(struct rl_open_xrcd) == 24, "open xrcd");
_Static_assert(sizeof(struct rl_create_xrc_srq) == 24, "create xrc srq");
_Static_assert(sizeof(struct rl_xrc_srq_resp) == 32, "xrc srq response");
_Static_assert(sizeof(struct rl_qp_resp) == 56, "qp response");
_Static_assert(sizeof(struct rl_qp_attr) == 86, "qp attr");
_Static_assert(sizeof(struct rl_send_wqe) == 64, "send wqe");
_Static_assert(sizeof(struct rl_recv_wqe) == 16, "recv wqe");
_Static_assert(sizeof(struct rl_sge) == 16, "sge");
_Static_assert(sizeof(struct rl_cqe) == 64, "cqe");

#endif
