/*
 * wire_dump: prints, one per line as "name hex", the encodings of sample RDMA-CM
 * messages as librdmacm/wire_cm.h lays them out. TestCMCEncodings
 * (rnic/service/wire/c_test.go) builds it and compares every line with package wire's
 * encoding of the same values.
 */
#include <stdio.h>
#include <string.h>

#include "../wire_cm.h"

static void dump(const char *name, const void *p, size_t n)
{
	printf("%s ", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", ((const unsigned char *)p)[i]);
	printf("\n");
}

static void request(const char *name, uint16_t op, uint32_t seq, const void *body, size_t n)
{
	unsigned char b[RL_MAX_MESSAGE];
	struct rl_header h = {.version = RL_WIRE_VERSION, .op = op, .word = seq};
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), body, n);
	dump(name, b, sizeof(h) + n);
}

/* addr4 sets a to ::ffff:10.0.0.n, port. */
static void addr4(struct rl_cm_addr *a, uint8_t n, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->addr[10] = a->addr[11] = 0xff;
	a->addr[12] = 10, a->addr[15] = n;
	a->port = port;
}

static void param(struct rl_cm_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1, p->initiator_depth = 2, p->retry_count = 7, p->rnr_retry_count = 6;
	p->private_data_len = 5;
	memcpy(p->private_data, "rping", 5);
}

int main(void)
{
	struct rl_cm_create_id c = {.channel = 3, .port_space = 0x013F, .qp_type = 4};
	request("cm_create_id", RL_OP_CM_CREATE_ID, 1, &c, sizeof(c));
	struct rl_cm_bind b = {.id = 4};
	addr4(&b.addr, 1, 0);
	request("cm_bind", RL_OP_CM_BIND, 8, &b, sizeof(b));
	struct rl_cm_migrate_id m = {.id = 4, .channel = 9};
	request("cm_migrate_id", RL_OP_CM_MIGRATE_ID, 9, &m, sizeof(m));
	struct rl_cm_listen l = {.id = 4, .backlog = 8};
	addr4(&l.addr, 1, 7174);
	request("cm_listen", RL_OP_CM_LISTEN, 2, &l, sizeof(l));
	struct rl_cm_resolve_addr r = {.id = 5, .timeout_ms = 2000};
	addr4(&r.src, 1, 0);
	addr4(&r.dst, 2, 7174);
	request("cm_resolve_addr", RL_OP_CM_RESOLVE_ADDR, 3, &r, sizeof(r));
	struct rl_cm_connect k = {.id = 5, .qp = 9, .qpn = 0x33};
	param(&k.param);
	request("cm_connect", RL_OP_CM_CONNECT, 4, &k, sizeof(k));
	struct rl_cm_reject j = {.id = 6, .private_data_len = 2};
	j.private_data[0] = 0xab, j.private_data[1] = 0xcd;
	request("cm_reject", RL_OP_CM_REJECT, 5, &j, sizeof(j));
	struct rl_cm_init_qp_attr ia = {.id = 5, .state = 2};
	request("cm_init_qp_attr", RL_OP_CM_INIT_QP_ATTR, 6, &ia, sizeof(ia));
	struct rl_cm_qp_attr qa = {.mask = 0x1a5, .attr = {.state = 2, .path_mtu = 1024, .dest_qpn = 0x11, .rq_psn = 0x123456,
							   .max_dest_rd_atomic = 16, .min_rnr_timer = 12, .hop_limit = 64,
							   .traffic_class = 0x28, .flow_label = 0xabcde}};
	dump("cm_qp_attr", &qa, sizeof(qa));
	struct rl_cm_set_option so = {.id = 5, .option = 3, .value = 14};
	request("cm_set_option", RL_OP_CM_SET_OPTION, 7, &so, sizeof(so));
	struct rl_cm_event e = {.type = 4, .status = -110, .id = 7, .listener = 4, .qpn = 0x11,
				.qkey = 0x01234567, .flow_label = 0xabcde};
	addr4(&e.local, 1, 7174);
	addr4(&e.remote, 2, 42570);
	param(&e.param);
	dump("cm_event", &e, sizeof(e));
	return 0;
}
