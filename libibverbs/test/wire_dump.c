/*
 * wire_dump: prints, one per line as "name hex", the encodings that rocelab's
 * libibverbs.so.1 produces for sample messages and ring entries (libibverbs/wire.h).
 * TestCEncodings (rnic/service/wire/c_test.go) builds it and compares every line with
 * package wire's encoding of the same values.
 */
#include <stdio.h>
#include <string.h>

#include "../wire.h"

static void dump(const char *name, const void *p, size_t n)
{
	printf("%s ", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", ((const unsigned char *)p)[i]);
	printf("\n");
}

/* request: header (op, seq) + body */
static void request(const char *name, uint16_t op, uint32_t seq, const void *body, size_t n)
{
	unsigned char b[RL_MAX_MESSAGE];
	struct rl_header h = {.version = RL_WIRE_VERSION, .op = op, .word = seq};
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), body, n);
	dump(name, b, sizeof(h) + n);
}

int main(void)
{
	struct rl_hello hello = {1, 1};
	request("hello", RL_OP_HELLO, 1, &hello, sizeof(hello));
	struct rl_reg_mr reg = {.pd = 3, .access = 15, .length = 0x12345, .offset = 0x7f0000001000, .addr = 0x7f0000001234};
	request("reg_mr", RL_OP_REG_MR, 2, &reg, sizeof(reg));
	struct rl_create_cq cq = {.cqe = 256, .channel = 4};
	request("create_cq", RL_OP_CREATE_CQ, 3, &cq, sizeof(cq));
	struct rl_create_srq srq = {.pd = 3, .max_wr = 64, .max_sge = 2};
	request("create_srq", RL_OP_CREATE_SRQ, 4, &srq, sizeof(srq));
	struct rl_create_ah ah = {.pd = 3, .sgid_index = 1, .traffic_class = 0x28, .hop_limit = 64, .flow_label = 0xabcde};
	for (int i = 0; i < 16; i++)
		ah.dgid[i] = 0xf0 + i;
	request("create_ah", RL_OP_CREATE_AH, 5, &ah, sizeof(ah));
	struct rl_create_qp qp = {.pd = 3, .send_cq = 5, .recv_cq = 6, .srq = 7, .type = 4, .sig_all = 1,
				  .max_send_wr = 128, .max_recv_wr = 256, .max_send_sge = 2, .max_recv_sge = 3};
	request("create_qp", RL_OP_CREATE_QP, 6, &qp, sizeof(qp));
	struct rl_modify_qp m = {.handle = 9, .mask = 0x1fffff};
	struct rl_qp_attr *a = &m.attr;
	a->state = 3, a->cur_state = 2, a->en_sqd_async_notify = 1, a->port = 1, a->access_flags = 7, a->pkey_index = 2,
	a->path_mtu = 1024, a->qkey = 0x11111111;
	for (int i = 0; i < 16; i++)
		a->dgid[i] = i, a->sgid[i] = 0x80 + i;
	for (int i = 0; i < 6; i++)
		a->dst_mac[i] = 0x10 + i, a->src_mac[i] = 0x20 + i;
	a->traffic_class = 0x28, a->hop_limit = 64, a->timeout = 14, a->retry_cnt = 7, a->rnr_retry = 6,
	a->max_rd_atomic = 4, a->min_rnr_timer = 12, a->max_dest_rd_atomic = 5, a->path_mig_state = 0,
	a->flow_label = 0x12345, a->rq_psn = 0x654321, a->sq_psn = 0x123456, a->dest_qpn = 0x11;
	request("modify_qp", RL_OP_MODIFY_QP, 7, &m, sizeof(m));
	struct rl_qp_resp qr = {.handle = 9, .qpn = 0x11, .max_send_wr = 128, .max_recv_wr = 256, .max_send_sge = 2,
				.max_recv_sge = 3, .send_entry = 96, .recv_entry = 64, .sq_offset = 0, .rq_offset = 12480,
				.size = 28672};
	dump("qp_resp", &qr, sizeof(qr));
	struct rl_ring_resp rr = {.handle = 5, .cap = 256, .entry_size = 64, .size = 16576};
	dump("ring_resp", &rr, sizeof(rr));
	struct rl_resize rs = {.handle = 5, .entries = 1000};
	request("resize_cq", RL_OP_RESIZE_CQ, 8, &rs, sizeof(rs));
	request("resize_srq", RL_OP_RESIZE_SRQ, 9, &rs, sizeof(rs));
	struct rl_rereg_mr rm = {.handle = 4, .pd = 6, .access = 7, .change_pd = 1, .change_access = 1};
	request("rereg_mr", RL_OP_REREG_MR, 10, &rm, sizeof(rm));
	struct rl_mcast mc = {.handle = 4};
	for (int i = 0; i < 16; i++)
		mc.gid[i] = (uint8_t)(0xf0 + i);
	request("attach_mcast", RL_OP_ATTACH_MCAST, 11, &mc, sizeof(mc));
	mc.handle = 5;
	request("detach_mcast", RL_OP_DETACH_MCAST, 12, &mc, sizeof(mc));
	struct rl_open_xrcd ox = {.dev = 0x803, .ino = 1234, .oflags = 0x40, .has_file = 1};
	request("open_xrcd", RL_OP_OPEN_XRCD, 13, &ox, sizeof(ox));
	struct rl_create_xrc_srq xs = {.pd = 3, .max_wr = 64, .max_sge = 2, .xrcd = 4, .cq = 5};
	request("create_xrc_srq", RL_OP_CREATE_XRC_SRQ, 14, &xs, sizeof(xs));
	struct rl_xrc_srq_resp xr = {.ring = {.handle = 6, .cap = 64, .entry_size = 48, .size = 8192}, .srqn = 0x123};
	dump("xrc_srq_resp", &xr, sizeof(xr));
	struct rl_open_qp oq = {.xrcd = 4, .qpn = 0x11};
	request("open_qp", RL_OP_OPEN_QP, 15, &oq, sizeof(oq));
	struct rl_port_attr pa = {.max_mtu = 4096, .active_mtu = 1024, .gid_table_len = 3, .max_msg_sz = 1 << 23,
				  .rate = 100000000000ull,
				  .state = "ACTIVE", .link_layer = "Ethernet"};
	dump("port_attr", &pa, sizeof(pa));
	struct rl_device_attr da = {.node_guid = 0x0200fffe000001ull, .max_qp = 1, .max_qp_wr = 2, .max_sge = 3,
				    .max_cqe = 4, .max_qp_rd_atom = 5, .max_qp_init_rd_atom = 6, .phys_port_cnt = 7,
				    .max_srq = 8, .fw_ver = "rocelab", .max_mcast_grp = 9, .max_mcast_qp_attach = 10,
				    .max_total_mcast_qp_attach = 11};
	dump("device_attr", &da, sizeof(da));
	struct rl_hello_resp hr = {.version = 1, .page_size = 4096, .pid = 1234};
	dump("hello_resp", &hr, sizeof(hr));
	struct rl_async_event ae = {.type = 15, .handle = 7};
	dump("async_event", &ae, sizeof(ae));

	unsigned char e[sizeof(struct rl_send_wqe) + 2 * sizeof(struct rl_sge)];
	struct rl_send_wqe w = {.wr_id = 0x1122334455667788ull, .opcode = 5, .nsge = 2, .flags = 6, .imm = 0xC0FFEE,
				.rkey = 0x1234, .remote_addr = 0x7f00deadbeef, .compare_add = 42, .swap = 7, .ah = 3,
				.remote_qpn = 0x11, .remote_qkey = 0x11111111, .inv_rkey = 0x99};
	struct rl_sge s[2] = {{0x1000, 4096, 0x55}, {0x3000, 100, 0x66}};
	memcpy(e, &w, sizeof(w));
	memcpy(e + sizeof(w), s, sizeof(s));
	dump("send_wqe", e, sizeof(e));
	unsigned char r[sizeof(struct rl_recv_wqe) + sizeof(struct rl_sge)];
	struct rl_recv_wqe rw = {.wr_id = 77, .nsge = 1};
	memcpy(r, &rw, sizeof(rw));
	memcpy(r + sizeof(rw), s, sizeof(s[0]));
	dump("recv_wqe", r, sizeof(r));
	struct rl_cqe c = {.wr_id = 99, .status = 10, .opcode = 129, .pkey_index = 1, .vendor_err = 0x5e0001,
			   .byte_len = 100, .imm = 0xC0FFEE, .qp_num = 0x11, .src_qp = 0x12, .flags = 3, .sl = 2};
	dump("cqe", &c, sizeof(c));
	return 0;
}
