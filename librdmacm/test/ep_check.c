/*
 * ep_check: rocelab's librdmacm.so.1 through the convenience API (<rdma/rdma_verbs.h>,
 * what rdma_server/rdma_client and libfabric's verbs provider use), compiled against
 * librdmacm-dev as any program is and run by TestLibrdmacm between two lab hosts:
 *
 *   ep_check server PORT            (first)
 *   ep_check client ADDR PORT       (ADDR, PORT: the server's)
 *
 * Both first check rdma_getaddrinfo, port allocation and the synchronous calls' error
 * paths, each errno as rdma-core's librdmacm (librdmacm/cma.c, addrinfo.c) and the
 * kernel's rdma_cm (drivers/infiniband/core/cma.c, ucma.c) give it; the sources are
 * cited at each check. Then: a synchronous endpoint each (rdma_create_ep), the
 * library's CQs and completion channels, rdma_get_request, rdma_reg_msgs/read/write,
 * SEND, RDMA WRITE and READ with the rdma_post_* and rdma_get_*_comp inlines; the
 * server's reply names a second listener on an ephemeral port (port 0), which the
 * client connects to with an identifier it migrates to an event channel of its own.
 * Each check prints "ok" or "FAIL" and a name; the exit status is the number of
 * failures. A client that finds no listener yet prints "no listener yet" and exits 1
 * (the test starts it again).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../../libibverbs/test/check.h"

/* What the server's reply tells the client: its RDMA WRITE and READ targets and the
 * port of its second listener. */
struct reply {
	uint64_t waddr, raddr;
	uint32_t wkey, rkey;
	uint16_t port2;
};

static const char hello[16] = "hello, server!";
static const char pattern[32] = "read me, the server's pattern.";
static const char written[32] = "written by the client, RDMA.";

static unsigned range_lo = 32768, range_hi = 60999;

/* port_range reads the namespace's ephemeral range, where the kernel's
 * cma_alloc_any_port takes ports from (inet_get_local_port_range). */
static void port_range(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%u %u", &range_lo, &range_hi) != 2)
			range_lo = 32768, range_hi = 60999;
		fclose(f);
	}
}

static int in_range(uint16_t port) { return port >= range_lo && port <= range_hi; }

static struct sockaddr_in v4(const char *a, uint16_t port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

#define SA(x) ((struct sockaddr *)&(x))

static void check_getaddrinfo(const char *local)
{
	struct rdma_addrinfo hints, *res = NULL;
	errno = 0;
	/* addrinfo.c rdma_getaddrinfo: "if (!service && !node && !hints) return ERR(EINVAL)" */
	CHECK(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL,
	      "rdma_getaddrinfo without node, service and hints: -1, EINVAL");

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	int ret = rdma_getaddrinfo("10.0.0.1", "7471", &hints, &res);
	/* ucma_convert_to_rai: an active answer keeps ai_flags 0 and names the destination */
	CHECK(ret == 0 && res->ai_family == AF_INET && res->ai_qp_type == IBV_QPT_RC && res->ai_port_space == RDMA_PS_TCP &&
		      res->ai_flags == 0 && !res->ai_src_addr && res->ai_dst_len == sizeof(struct sockaddr_in) &&
		      ((struct sockaddr_in *)res->ai_dst_addr)->sin_port == htons(7471) && !res->ai_next,
	      "rdma_getaddrinfo(10.0.0.1, RDMA_PS_TCP): the destination, RC");
	if (!ret)
		rdma_freeaddrinfo(res);

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_UDP;
	ret = rdma_getaddrinfo(NULL, "7471", &hints, &res);
	/* ucma_convert_to_ai: RDMA_PS_UDP asks for IPPROTO_UDP, whose answer is SOCK_DGRAM: UD */
	CHECK(ret == 0 && res->ai_flags == RAI_PASSIVE && res->ai_src_addr && !res->ai_dst_addr &&
		      res->ai_qp_type == IBV_QPT_UD && res->ai_port_space == RDMA_PS_UDP,
	      "rdma_getaddrinfo(RAI_PASSIVE, RDMA_PS_UDP): the wildcard source, UD");
	if (!ret)
		rdma_freeaddrinfo(res);

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_IB;
	hints.ai_qp_type = IBV_QPT_UD;
	hints.ai_flags = RAI_NUMERICHOST;
	ret = rdma_getaddrinfo("fd00::1", "7471", &hints, &res);
	CHECK(ret == 0 && res->ai_family == AF_INET6 && res->ai_port_space == RDMA_PS_IB && res->ai_qp_type == IBV_QPT_UD,
	      "rdma_getaddrinfo(fd00::1, RDMA_PS_IB, UD)");
	if (!ret)
		rdma_freeaddrinfo(res);

	/* ucma_convert_to_rai: RAI_FAMILY with AF_IB and RAI_NUMERICHOST: a sockaddr_ib
	 * whose service ID is the port space's and port (ucma_convert_in6) */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_FAMILY | RAI_NUMERICHOST;
	hints.ai_family = AF_IB;
	hints.ai_port_space = RDMA_PS_TCP;
	ret = rdma_getaddrinfo("fd00::1", "7471", &hints, &res);
	struct sockaddr_ib *ib = ret ? NULL : (struct sockaddr_ib *)res->ai_dst_addr;
	CHECK(ib && res->ai_family == AF_IB && ib->sib_family == AF_IB && res->ai_dst_len == sizeof(*ib) &&
		      be64toh(ib->sib_sid) == ((uint64_t)RDMA_PS_TCP << 16 | 7471) &&
		      be64toh(ib->sib_sid_mask) == (RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK) && ib->sib_pkey == htons(0xffff),
	      "rdma_getaddrinfo(RAI_FAMILY, AF_IB): a sockaddr_ib with the IP service ID");
	if (!ret)
		rdma_freeaddrinfo(res);

	/* the resolver's failure is its EAI_ code, as librdmacm returns it */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	CHECK(rdma_getaddrinfo("not-a-number", "7471", &hints, &res) == EAI_NONAME,
	      "rdma_getaddrinfo(RAI_NUMERICHOST, a name): EAI_NONAME");

	/* neither node nor service: the hints' addresses are the answer */
	struct sockaddr_in dst = v4(local, 9);
	memset(&hints, 0, sizeof(hints));
	hints.ai_dst_addr = SA(dst);
	hints.ai_dst_len = sizeof(dst);
	hints.ai_port_space = RDMA_PS_TCP;
	ret = rdma_getaddrinfo(NULL, NULL, &hints, &res);
	CHECK(ret == 0 && res->ai_dst_len == sizeof(dst) && memcmp(res->ai_dst_addr, &dst, sizeof(dst)) == 0 &&
		      res->ai_port_space == RDMA_PS_TCP,
	      "rdma_getaddrinfo(NULL, NULL, hints): the hints' destination");
	if (!ret)
		rdma_freeaddrinfo(res);
}

/* check_ports: the kernel's port allocation (cma.c cma_get_port, cma_alloc_any_port,
 * cma_check_port) as rdma_bind_addr and rdma_listen see it. */
static void check_ports(const char *local)
{
	port_range();
	struct rdma_cm_id *a, *b, *c, *u, *l;
	struct sockaddr_in any = v4("0.0.0.0", 0), own = v4(local, 0);
	CHECK(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP) == 0 && rdma_bind_addr(a, SA(own)) == 0 &&
		      in_range(ntohs(rdma_get_src_port(a))),
	      "rdma_bind_addr to port 0: a port of ip_local_port_range (%u-%u), rdma_get_src_port %u", range_lo, range_hi,
	      ntohs(rdma_get_src_port(a)));
	uint16_t p = ntohs(rdma_get_src_port(a));
	errno = 0;
	/* rdma_bind_addr: cma_comp_exch(IDLE, ADDR_BOUND) fails: -EINVAL */
	CHECK(rdma_bind_addr(a, SA(own)) == -1 && errno == EINVAL, "a second rdma_bind_addr: EINVAL");
	struct sockaddr_in same = v4(local, p), wild = v4("0.0.0.0", p);
	CHECK(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP) == 0, "rdma_create_id without a channel");
	errno = 0;
	/* cma_check_port: the same address and port: -EADDRINUSE */
	CHECK(rdma_bind_addr(b, SA(same)) == -1 && errno == EADDRINUSE, "rdma_bind_addr to a bound address and port: EADDRINUSE");
	errno = 0;
	/* cma_check_port: either address the wildcard: -EADDRNOTAVAIL */
	CHECK(rdma_bind_addr(b, SA(wild)) == -1 && errno == EADDRNOTAVAIL,
	      "rdma_bind_addr of the wildcard address to a bound port: EADDRNOTAVAIL");
	/* cma_ps_find: each port space has its own ports */
	CHECK(rdma_create_id(NULL, &u, NULL, RDMA_PS_UDP) == 0 && rdma_bind_addr(u, SA(same)) == 0 &&
		      ntohs(rdma_get_src_port(u)) == p,
	      "the same address and port in RDMA_PS_UDP");
	struct sockaddr_in elsewhere = v4("10.9.9.9", 0);
	errno = 0;
	/* cma_translate_addr -> rdma_translate_ip: no device has the address: -EADDRNOTAVAIL */
	CHECK(rdma_bind_addr(b, SA(elsewhere)) == -1 && errno == EADDRNOTAVAIL,
	      "rdma_bind_addr to an address of no device: EADDRNOTAVAIL");
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	errno = 0;
	/* cma.c rdma_bind_addr: ucma_addrlen is 0: ERR(EINVAL) */
	CHECK(rdma_bind_addr(b, (struct sockaddr *)&un) == -1 && errno == EINVAL, "rdma_bind_addr of AF_UNIX: EINVAL");
	/* rdma_listen of an unbound identifier binds it to AF_INET's wildcard, port 0 */
	CHECK(rdma_create_id(NULL, &l, NULL, RDMA_PS_TCP) == 0 && rdma_listen(l, 1) == 0 &&
		      in_range(ntohs(rdma_get_src_port(l))) && ntohs(rdma_get_src_port(l)) != p &&
		      l->route.addr.src_addr.sa_family == AF_INET,
	      "rdma_listen unbound: an ephemeral port, %u", ntohs(rdma_get_src_port(l)));
	int on = 1;
	struct sockaddr_in shared = v4(local, 7490);
	/* rdma_set_reuseaddr, cma_check_port(reuseaddr): both set it: they share; a
	 * listener owns its port alone (rdma_listen: cma_check_port(..., 0)) */
	CHECK(rdma_create_id(NULL, &c, NULL, RDMA_PS_TCP) == 0 &&
		      rdma_set_option(b, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on)) == 0 &&
		      rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on)) == 0 &&
		      rdma_bind_addr(b, SA(shared)) == 0 && rdma_bind_addr(c, SA(shared)) == 0,
	      "REUSEADDR: two identifiers bind one address and port");
	errno = 0;
	CHECK(rdma_listen(b, 1) == -1 && errno == EADDRINUSE, "rdma_listen on a shared port: EADDRINUSE");
	struct sockaddr_in6 dst6 = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
	inet_pton(AF_INET6, "fd00::9", &dst6.sin6_addr);
	errno = 0;
	/* rdma_resolve_addr (resolve_prepare_src): the bound family is not dst's: -EINVAL */
	CHECK(rdma_resolve_addr(c, NULL, SA(dst6), 100) == -1 && errno == EINVAL,
	      "rdma_resolve_addr of IPv6 from an IPv4-bound identifier: EINVAL");
	rdma_destroy_id(c);
	rdma_destroy_id(b);
	CHECK(rdma_listen(l, 1) == -1 && errno == EINVAL, "a second rdma_listen: EINVAL");
	rdma_destroy_id(l);
	rdma_destroy_id(u);
	rdma_destroy_id(a);
	CHECK(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP) == 0 && rdma_bind_addr(a, SA(same)) == 0,
	      "the port is free again once its identifier is destroyed");
	rdma_destroy_id(a);
	(void)any;
}

static void check_sync_errors(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *async, *sync, *got;
	CHECK(ch && rdma_create_id(ch, &async, NULL, RDMA_PS_TCP) == 0 && rdma_create_id(NULL, &sync, NULL, RDMA_PS_TCP) == 0 &&
		      sync->channel && sync->channel != ch && sync->pd && sync->verbs,
	      "a synchronous identifier has a channel of its own and the device's PD");
	errno = 0;
	/* cma.c rdma_get_request: "if (!id_priv->sync) return ERR(EINVAL)" */
	CHECK(rdma_get_request(async, &got) == -1 && errno == EINVAL, "rdma_get_request on an asynchronous identifier: EINVAL");
	errno = 0;
	/* cma.c rdma_migrate_id: "if (id_priv->sync && !channel) return ERR(EINVAL)" */
	CHECK(rdma_migrate_id(sync, NULL) == -1 && errno == EINVAL, "rdma_migrate_id of a synchronous one to none: EINVAL");
	errno = 0;
	/* cma.c rdma_ack_cm_event: "if (!event) return ERR(EINVAL)" */
	CHECK(rdma_ack_cm_event(NULL) == -1 && errno == EINVAL, "rdma_ack_cm_event(NULL): EINVAL");
	errno = 0;
	/* ucma.c ucma_get_qp_type: an unknown port space: -EINVAL */
	CHECK(rdma_create_id(NULL, &got, NULL, (enum rdma_port_space)0x0999) == -1 && errno == EINVAL,
	      "rdma_create_id of an unknown port space: EINVAL");
	CHECK(rdma_create_id(ch, &got, NULL, RDMA_PS_IB) == 0 && got->qp_type == IBV_QPT_RC && rdma_destroy_id(got) == 0,
	      "rdma_create_id(RDMA_PS_IB): an RC identifier");
	struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
				      .qp_type = IBV_QPT_RC};
	CHECK(rdma_create_qp(sync, NULL, &qa) == 0 && sync->qp && sync->send_cq && sync->recv_cq && sync->send_cq_channel &&
		      sync->recv_cq_channel && qa.send_cq == sync->send_cq && sync->qp->pd == sync->pd,
	      "rdma_create_qp without PD and CQs: the library's, with their completion channels");
	errno = 0;
	/* cma.c rdma_create_qp_ex: "if (id->qp) return ERR(EINVAL)" */
	CHECK(rdma_create_qp(sync, NULL, &qa) == -1 && errno == EINVAL, "a second rdma_create_qp: EINVAL");
	rdma_destroy_qp(sync);
	CHECK(!sync->qp && !sync->send_cq && !sync->recv_cq && !sync->send_cq_channel && !sync->recv_cq_channel,
	      "rdma_destroy_qp destroys the library's CQs and channels");
	struct ibv_cq *cq = ibv_create_cq(sync->verbs, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qb = {.cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
				      .qp_type = IBV_QPT_RC, .recv_cq = cq};
	CHECK(cq && rdma_create_qp(sync, NULL, &qb) == 0 && !sync->recv_cq && sync->send_cq && sync->qp->recv_cq == cq,
	      "rdma_create_qp with a receive CQ: the library makes the send CQ only");
	rdma_destroy_qp(sync);
	ibv_destroy_cq(cq);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	CHECK(rdma_create_srq(sync, NULL, &sa) == 0 && sync->srq, "rdma_create_srq");
	/* a receive CQ still: rxe (rxe_qp_chk_init) wants both CQs with an SRQ too */
	struct ibv_qp_init_attr qc = {.cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1}, .qp_type = IBV_QPT_RC};
	errno = 0;
	CHECK(rdma_create_qp(sync, NULL, &qc) == 0 && sync->qp->srq == sync->srq, "rdma_create_qp uses the identifier's SRQ (%s)",
	      strerror(errno));
	CHECK(rdma_migrate_id(sync, ch) == 0 && sync->channel == ch, "rdma_migrate_id to an event channel");
	rdma_destroy_ep(sync); /* the QP, its CQs, the SRQ and the identifier */
	rdma_destroy_id(async);
	rdma_destroy_event_channel(ch);
}

static struct ibv_qp_init_attr ep_attr(void)
{
	struct ibv_qp_init_attr a = {.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
				     .sq_sig_all = 1};
	return a;
}

static int server(const char *port)
{
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP}, *res;
	int ret = rdma_getaddrinfo(NULL, port, &hints, &res);
	CHECK(ret == 0, "rdma_getaddrinfo(RAI_PASSIVE, %s)", port);
	if (ret)
		return failures;
	struct ibv_qp_init_attr attr = ep_attr();
	struct rdma_cm_id *listen, *listen2, *id, *id2;
	CHECK(rdma_create_ep(&listen, res, NULL, &attr) == 0 && listen->pd && !listen->qp, "rdma_create_ep (passive)");
	rdma_freeaddrinfo(res);
	CHECK(rdma_listen(listen, 1) == 0 && ntohs(rdma_get_src_port(listen)) == atoi(port), "rdma_listen");
	/* the second listener: port 0, so an ephemeral one, which the reply names */
	ret = rdma_getaddrinfo(NULL, "0", &hints, &res);
	CHECK(ret == 0 && rdma_create_ep(&listen2, res, NULL, &attr) == 0 && rdma_listen(listen2, 1) == 0 &&
		      in_range(ntohs(rdma_get_src_port(listen2))),
	      "a second listener on port 0: port %u", ntohs(rdma_get_src_port(listen2)));
	if (!ret)
		rdma_freeaddrinfo(res);
	printf("listening\n");
	fflush(stdout);

	CHECK(rdma_get_request(listen, &id) == 0 && id->qp && id->send_cq && id->recv_cq && id->recv_cq_channel &&
		      id->event && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST && id->event->listen_id == listen &&
		      id->channel != listen->channel,
	      "rdma_get_request: a synchronous identifier with rdma_create_ep's QP");
	char msg[16] = {0};
	static char rbuf[32], wbuf[32];
	memcpy(rbuf, pattern, sizeof(pattern));
	struct reply r = {0};
	struct ibv_mr *mr = rdma_reg_msgs(id, msg, sizeof(msg)), *rmr = rdma_reg_read(id, rbuf, sizeof(rbuf)),
		      *wmr = rdma_reg_write(id, wbuf, sizeof(wbuf)), *smr = rdma_reg_msgs(id, &r, sizeof(r));
	CHECK(mr && rmr && wmr && smr && (rmr->handle != wmr->handle), "rdma_reg_msgs, rdma_reg_read, rdma_reg_write");
	CHECK(rdma_post_recv(id, NULL, msg, sizeof(msg), mr) == 0, "rdma_post_recv");
	CHECK(rdma_accept(id, NULL) == 0 && id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED,
	      "rdma_accept returns with ESTABLISHED (the RTU)");
	struct ibv_wc wc;
	CHECK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == sizeof(hello) &&
		      memcmp(msg, hello, sizeof(hello)) == 0,
	      "rdma_get_recv_comp: the client's SEND");
	r = (struct reply){.waddr = (uintptr_t)wbuf, .raddr = (uintptr_t)rbuf, .wkey = wmr->rkey, .rkey = rmr->rkey,
			   .port2 = ntohs(rdma_get_src_port(listen2))};
	CHECK(rdma_post_recv(id, NULL, msg, sizeof(msg), mr) == 0 && rdma_post_send(id, NULL, &r, sizeof(r), smr, 0) == 0 &&
		      rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
	      "rdma_post_send, rdma_get_send_comp: the reply");
	CHECK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS && memcmp(wbuf, written, sizeof(written)) == 0,
	      "the client's RDMA WRITE is in place when its next SEND arrives");

	CHECK(rdma_get_request(listen2, &id2) == 0 && id2->qp, "rdma_get_request on the ephemeral port");
	CHECK(rdma_accept(id2, NULL) == 0, "rdma_accept on the ephemeral port");
	/* a synchronous identifier's events are its own: the next is the disconnect */
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(id2->channel, &ev) == 0 && ev->event == RDMA_CM_EVENT_DISCONNECTED && rdma_ack_cm_event(ev) == 0,
	      "the client's disconnect on the ephemeral port's connection");
	rdma_destroy_ep(id2);
	CHECK(rdma_disconnect(id) == 0 && id->event && id->event->event == RDMA_CM_EVENT_DISCONNECTED,
	      "rdma_disconnect returns with DISCONNECTED");
	rdma_dereg_mr(mr);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(wmr);
	rdma_dereg_mr(smr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen2);
	rdma_destroy_ep(listen);
	return failures;
}

static int client(const char *addr, const char *port)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	int ret = rdma_getaddrinfo(addr, port, &hints, &res);
	CHECK(ret == 0, "rdma_getaddrinfo(%s, %s)", addr, port);
	if (ret)
		return failures;
	struct ibv_qp_init_attr attr = ep_attr();
	struct rdma_cm_id *id;
	CHECK(rdma_create_ep(&id, res, NULL, &attr) == 0 && id->qp && id->send_cq_channel && in_range(ntohs(rdma_get_src_port(id))) &&
		      ntohs(rdma_get_dst_port(id)) == atoi(port),
	      "rdma_create_ep (active): address and route resolved, the QP; source port %u", ntohs(rdma_get_src_port(id)));
	rdma_freeaddrinfo(res);
	static char out[16], back[32];
	static struct reply r;
	memcpy(out, hello, sizeof(hello));
	struct ibv_mr *mr = rdma_reg_msgs(id, out, sizeof(out)), *rmr = rdma_reg_msgs(id, &r, sizeof(r)),
		      *bmr = rdma_reg_msgs(id, back, sizeof(back));
	CHECK(mr && rmr && bmr && rdma_post_recv(id, NULL, &r, sizeof(r), rmr) == 0, "rdma_reg_msgs, rdma_post_recv");
	if (rdma_connect(id, NULL) == -1 && errno == ECONNREFUSED) {
		/* cma.c ucma_complete: REJECTED is ECONNREFUSED */
		printf("no listener yet\n");
		return 1;
	}
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED, "rdma_connect returns with ESTABLISHED");
	struct ibv_wc wc;
	CHECK(rdma_post_send(id, NULL, out, sizeof(out), mr, 0) == 0 && rdma_get_send_comp(id, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS,
	      "rdma_post_send, rdma_get_send_comp");
	CHECK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == sizeof(r) && r.port2,
	      "rdma_get_recv_comp: the server's reply names its ephemeral port %u", r.port2);
	memcpy(back, written, sizeof(written));
	CHECK(rdma_post_write(id, NULL, back, sizeof(written), bmr, 0, r.waddr, r.wkey) == 0 && rdma_get_send_comp(id, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE,
	      "rdma_post_write to the server's rdma_reg_write region");
	memset(back, 0, sizeof(back));
	CHECK(rdma_post_read(id, NULL, back, sizeof(back), bmr, 0, r.raddr, r.rkey) == 0 && rdma_get_send_comp(id, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && memcmp(back, pattern, sizeof(pattern)) == 0,
	      "rdma_post_read of the server's rdma_reg_read region");
	CHECK(rdma_post_send(id, NULL, out, sizeof(out), mr, 0) == 0 && rdma_get_send_comp(id, &wc) == 1,
	      "a SEND after the WRITE");

	/* rdma_migrate_id takes the identifier's queued events along (the kernel's
	 * ucma_move_events): ADDR_RESOLVED, queued on ch1, is ch2's; ch1 has none. */
	struct rdma_event_channel *ch1 = rdma_create_event_channel(), *ch2 = rdma_create_event_channel();
	struct rdma_cm_id *m;
	struct rdma_cm_event *mev = NULL;
	struct sockaddr_in to = v4(addr, 9);
	CHECK(ch1 && ch2 && rdma_create_id(ch1, &m, NULL, RDMA_PS_TCP) == 0 && rdma_resolve_addr(m, NULL, SA(to), 2000) == 0 &&
		      rdma_migrate_id(m, ch2) == 0 && rdma_get_cm_event(ch2, &mev) == 0 &&
		      mev->event == RDMA_CM_EVENT_ADDR_RESOLVED && mev->id == m,
	      "rdma_migrate_id moves a queued event to the new channel");
	if (mev)
		rdma_ack_cm_event(mev);
	errno = 0;
	CHECK(fcntl(ch1->fd, F_SETFL, O_NONBLOCK) == 0 && rdma_get_cm_event(ch1, &mev) == -1 && errno == EAGAIN,
	      "the old channel has no event left: EAGAIN");
	rdma_destroy_id(m);
	rdma_destroy_event_channel(ch1);
	rdma_destroy_event_channel(ch2);

	/* The ephemeral port the server got, with an identifier migrated to a channel. */
	char port2[8];
	snprintf(port2, sizeof(port2), "%u", r.port2);
	struct rdma_cm_id *id2;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev = NULL;
	ret = rdma_getaddrinfo(addr, port2, &hints, &res);
	CHECK(ret == 0 && rdma_create_ep(&id2, res, NULL, &attr) == 0 && rdma_migrate_id(id2, ch) == 0 && id2->channel == ch,
	      "rdma_create_ep to port %s, rdma_migrate_id to an event channel", port2);
	if (!ret)
		rdma_freeaddrinfo(res);
	CHECK(rdma_connect(id2, NULL) == 0 && rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ESTABLISHED &&
		      ev->id == id2,
	      "the server's ephemeral port accepts: ESTABLISHED on the channel");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_disconnect(id2) == 0 && rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_DISCONNECTED,
	      "rdma_disconnect: DISCONNECTED on the channel");
	rdma_ack_cm_event(ev);
	rdma_destroy_ep(id2);
	rdma_destroy_event_channel(ch);

	CHECK(rdma_disconnect(id) == 0 && id->event && id->event->event == RDMA_CM_EVENT_DISCONNECTED,
	      "rdma_disconnect returns with DISCONNECTED");
	rdma_dereg_mr(mr);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(bmr);
	rdma_destroy_ep(id);
	return failures;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "client") == 0) {
		check_getaddrinfo(getenv("ROCELAB_IPV4"));
		check_ports(getenv("ROCELAB_IPV4"));
		check_sync_errors();
		return client(argv[2], argv[3]);
	}
	if (argc == 3 && strcmp(argv[1], "server") == 0) {
		check_getaddrinfo(getenv("ROCELAB_IPV4"));
		check_ports(getenv("ROCELAB_IPV4"));
		check_sync_errors();
		return server(argv[2]);
	}
	fprintf(stderr, "usage: ep_check server PORT | ep_check client ADDR PORT\n");
	return 2;
}
