/*
 * The rest of libibverbs' exported symbols: the string and rate helpers (implemented),
 * the verbs rocelab's soft-RNIC does not have (one line on stderr naming the verb at
 * first use, EOPNOTSUPP), and IBVERBS_PRIVATE_34, the interface of rdma-core's provider
 * plugins: libmlx5 and libefa (which perftest links) register themselves through it
 * when they load, so it must resolve; this library loads no provider and no provider
 * ever gets a device from it, so the registration is dropped and the rest refuses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "rocelab.h"

/* ---- strings ---- */

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof(s) / sizeof(s[0]) && s[status])
		return s[status];
	return "unknown";
}

const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {[IBV_NODE_CA] = "InfiniBand channel adapter",
					[IBV_NODE_SWITCH] = "InfiniBand switch",
					[IBV_NODE_ROUTER] = "InfiniBand router",
					[IBV_NODE_RNIC] = "iWARP NIC",
					[IBV_NODE_USNIC] = "usNIC",
					[IBV_NODE_USNIC_UDP] = "usNIC UDP",
					[IBV_NODE_UNSPECIFIED] = "unspecified"};
	if (t < IBV_NODE_CA || (unsigned)t >= sizeof(s) / sizeof(s[0]) || !s[t])
		return "unknown";
	return s[t];
}

const char *ibv_port_state_str(enum ibv_port_state st)
{
	static const char *const s[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE",
					"PORT_ACTIVE_DEFER"};
	return (unsigned)st < sizeof(s) / sizeof(s[0]) ? s[st] : "unknown";
}

const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const s[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)e < sizeof(s) / sizeof(s[0]) && s[e])
		return s[e];
	return "unknown";
}

/* ---- rates: enum ibv_rate <-> multiples of 2.5 Gb/s and Mb/s ---- */

static const struct {
	enum ibv_rate rate;
	int mult, mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},	 {IBV_RATE_5_GBPS, 2, 5000},	  {IBV_RATE_10_GBPS, 4, 10000},
	{IBV_RATE_20_GBPS, 8, 20000},	 {IBV_RATE_30_GBPS, 12, 30000},	  {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},	 {IBV_RATE_80_GBPS, 32, 80000},	  {IBV_RATE_120_GBPS, 48, 120000},
	{IBV_RATE_14_GBPS, 0, 14062},	 {IBV_RATE_56_GBPS, 0, 56250},	  {IBV_RATE_112_GBPS, 0, 112500},
	{IBV_RATE_168_GBPS, 0, 168750},	 {IBV_RATE_25_GBPS, 10, 25781},	  {IBV_RATE_100_GBPS, 40, 103125},
	{IBV_RATE_200_GBPS, 80, 206250}, {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},	 {IBV_RATE_400_GBPS, 160, 425000}, {IBV_RATE_600_GBPS, 240, 637500},
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mult ? rates[i].mult : -1;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mult == mult && mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0; /* no in-order guarantee beyond the transport's */
}

/* ---- public verbs the soft-RNIC does not have ---- */

#define UNSUPPORTED_INT(name, ...)                                                                                     \
	int name(__VA_ARGS__)                                                                                          \
	{                                                                                                              \
		rl_unsupported(#name);                                                                                 \
		return EOPNOTSUPP;                                                                                     \
	}
#define UNSUPPORTED_NEG(name, ...)                                                                                     \
	int name(__VA_ARGS__)                                                                                          \
	{                                                                                                              \
		rl_unsupported(#name);                                                                                 \
		return -1;                                                                                             \
	}
#define UNSUPPORTED_PTR(type, name, ...)                                                                               \
	type name(__VA_ARGS__)                                                                                         \
	{                                                                                                              \
		rl_unsupported(#name);                                                                                 \
		return NULL;                                                                                           \
	}
#define UNSUPPORTED_VOID(name, ...)                                                                                    \
	void name(__VA_ARGS__)                                                                                         \
	{                                                                                                              \
		rl_unsupported(#name);                                                                                 \
	}

UNSUPPORTED_PTR(struct ibv_mr *, ibv_reg_dmabuf_mr, struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
		int fd, int access)
UNSUPPORTED_PTR(struct ibv_context *, ibv_import_device, int cmd_fd)
UNSUPPORTED_PTR(struct ibv_pd *, ibv_import_pd, struct ibv_context *context, uint32_t pd_handle)
UNSUPPORTED_VOID(ibv_unimport_pd, struct ibv_pd *pd)
UNSUPPORTED_PTR(struct ibv_mr *, ibv_import_mr, struct ibv_pd *pd, uint32_t mr_handle)
UNSUPPORTED_VOID(ibv_unimport_mr, struct ibv_mr *mr)
UNSUPPORTED_PTR(struct ibv_dm *, ibv_import_dm, struct ibv_context *context, uint32_t dm_handle)
UNSUPPORTED_VOID(ibv_unimport_dm, struct ibv_dm *dm)
UNSUPPORTED_INT(ibv_set_ece, struct ibv_qp *qp, struct ibv_ece *ece)
UNSUPPORTED_INT(ibv_query_ece, struct ibv_qp *qp, struct ibv_ece *ece)
UNSUPPORTED_NEG(ibv_resolve_eth_l2_from_gid, struct ibv_context *context, struct ibv_ah_attr *attr, uint8_t eth_mac[6],
		uint16_t *vid)
/* kernel-ABI struct conversions, for librdmacm's kernel path (RDMA-CM is not served) */
UNSUPPORTED_VOID(ibv_copy_qp_attr_from_kern, void *dst, void *src)
UNSUPPORTED_VOID(ibv_copy_ah_attr_from_kern, void *dst, void *src)
UNSUPPORTED_VOID(ibv_copy_path_rec_from_kern, void *dst, void *src)
UNSUPPORTED_VOID(ibv_copy_path_rec_to_kern, void *dst, void *src)


/* ---- IBVERBS_PRIVATE_34: the provider interface ---- */

bool verbs_allow_disassociate_destroy;

/* A provider library's constructor registers its driver; no provider is used here. */
void verbs_register_driver_34(const void *ops)
{
	(void)ops;
}

#define PRIVATE(name)                                                                                                  \
	int name(void)                                                                                                 \
	{                                                                                                              \
		rl_unsupported(#name " (provider interface)");                                                         \
		return EOPNOTSUPP;                                                                                     \
	}
#define PRIVATE_PTR(name)                                                                                              \
	void *name(void)                                                                                               \
	{                                                                                                              \
		rl_unsupported(#name " (provider interface)");                                                         \
		return NULL;                                                                                           \
	}

PRIVATE(__ioctl_final_num_attrs)
PRIVATE(__verbs_log)
PRIVATE_PTR(_verbs_init_and_alloc_context)
PRIVATE(execute_ioctl)
PRIVATE(ibv_cmd_advise_mr)
PRIVATE(ibv_cmd_alloc_dm)
PRIVATE(ibv_cmd_alloc_mw)
PRIVATE(ibv_cmd_alloc_pd)
PRIVATE(ibv_cmd_attach_mcast)
PRIVATE(ibv_cmd_close_xrcd)
PRIVATE(ibv_cmd_create_ah)
PRIVATE(ibv_cmd_create_counters)
PRIVATE(ibv_cmd_create_cq)
PRIVATE(ibv_cmd_create_cq_ex)
PRIVATE(ibv_cmd_create_flow)
PRIVATE(ibv_cmd_create_flow_action_esp)
PRIVATE(ibv_cmd_create_qp)
PRIVATE(ibv_cmd_create_qp_ex)
PRIVATE(ibv_cmd_create_qp_ex2)
PRIVATE(ibv_cmd_create_rwq_ind_table)
PRIVATE(ibv_cmd_create_srq)
PRIVATE(ibv_cmd_create_srq_ex)
PRIVATE(ibv_cmd_create_wq)
PRIVATE(ibv_cmd_dealloc_mw)
PRIVATE(ibv_cmd_dealloc_pd)
PRIVATE(ibv_cmd_dereg_mr)
PRIVATE(ibv_cmd_destroy_ah)
PRIVATE(ibv_cmd_destroy_counters)
PRIVATE(ibv_cmd_destroy_cq)
PRIVATE(ibv_cmd_destroy_flow)
PRIVATE(ibv_cmd_destroy_flow_action)
PRIVATE(ibv_cmd_destroy_qp)
PRIVATE(ibv_cmd_destroy_rwq_ind_table)
PRIVATE(ibv_cmd_destroy_srq)
PRIVATE(ibv_cmd_destroy_wq)
PRIVATE(ibv_cmd_detach_mcast)
PRIVATE(ibv_cmd_free_dm)
PRIVATE(ibv_cmd_get_context)
PRIVATE(ibv_cmd_modify_cq)
PRIVATE(ibv_cmd_modify_flow_action_esp)
PRIVATE(ibv_cmd_modify_qp)
PRIVATE(ibv_cmd_modify_qp_ex)
PRIVATE(ibv_cmd_modify_srq)
PRIVATE(ibv_cmd_modify_wq)
PRIVATE(ibv_cmd_open_qp)
PRIVATE(ibv_cmd_open_xrcd)
PRIVATE(ibv_cmd_poll_cq)
PRIVATE(ibv_cmd_post_recv)
PRIVATE(ibv_cmd_post_send)
PRIVATE(ibv_cmd_post_srq_recv)
PRIVATE(ibv_cmd_query_context)
PRIVATE(ibv_cmd_query_device_any)
PRIVATE(ibv_cmd_query_mr)
PRIVATE(ibv_cmd_query_port)
PRIVATE(ibv_cmd_query_qp)
PRIVATE(ibv_cmd_query_srq)
PRIVATE(ibv_cmd_read_counters)
PRIVATE(ibv_cmd_reg_dm_mr)
PRIVATE(ibv_cmd_reg_dmabuf_mr)
PRIVATE(ibv_cmd_reg_mr)
PRIVATE(ibv_cmd_req_notify_cq)
PRIVATE(ibv_cmd_rereg_mr)
PRIVATE(ibv_cmd_resize_cq)
PRIVATE(ibv_read_ibdev_sysfs_file)
PRIVATE(verbs_init_cq)
PRIVATE_PTR(verbs_open_device)
PRIVATE(verbs_set_ops)
PRIVATE(verbs_uninit_context)
