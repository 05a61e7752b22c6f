/*
 * verbs_check: calls the verbs of issue 14's item 3 through <infiniband/verbs.h>, with
 * their error paths, against the one device of a lab host, and checks every result.
 * Built against libibverbs-dev and run with rocelab's libibverbs.so.1 by
 * TestLibibverbs (cmd/rocelab/ibverbs_lab_test.go) in two lab hosts:
 *
 *	verbs_check server            (in one host; listens on TCP port 18777)
 *	verbs_check client SERVER_IP  (in another)
 *
 * The two exchange QP numbers, GIDs and keys over TCP, and meet at barriers; the client
 * drives the operations, each side checks what it can see (the server: what landed in
 * its memory). Exit status 0 = every check of that side held; each failed check prints
 * one line.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		checks++;                                                                                              \
		if (!(cond)) {                                                                                         \
			failures++;                                                                                    \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));                                   \
		}                                                                                                      \
	} while (0)

/* MUST: a check whose failure ends the run (cond is evaluated once) */
#define MUST(cond, ...)                                                                                                \
	do {                                                                                                           \
		checks++;                                                                                              \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));                                   \
			exit(1);                                                                                       \
		}                                                                                                      \
	} while (0)

static struct ibv_context *ctx;
static int is_client, sock = -1;
static struct ibv_pd *pd;
static union ibv_gid gid;
static const int gid_index = 1; /* ::ffff:IPv4, rxe's numbering */

/* what the two sides tell each other */
struct peer {
	uint32_t qpn, rkey, rkey_iova, pad;
	uint64_t addr;
	union ibv_gid gid;
};

static void xfer(void *out, void *in, size_t n)
{
	MUST(write(sock, out, n) == (ssize_t)n, "send to the peer");
	for (size_t got = 0; got < n;) {
		ssize_t k = read(sock, (char *)in + got, n - got);
		MUST(k > 0, "receive from the peer");
		got += k;
	}
}

static struct peer exchange(uint32_t qpn, struct ibv_mr *mr, void *addr, struct ibv_mr *iova)
{
	struct peer me = {.qpn = qpn, .rkey = mr ? mr->rkey : 0, .rkey_iova = iova ? iova->rkey : 0,
			  .addr = (uintptr_t)addr, .gid = gid},
		    them;
	xfer(&me, &them, sizeof(me));
	return them;
}

static void barrier(void)
{
	char c = 'b', d;
	xfer(&c, &d, 1);
}

static void meet(const char *server)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(18777)};
	MUST(fd >= 0, "socket");
	if (server) {
		MUST(inet_pton(AF_INET, server, &a.sin_addr) == 1, "server address %s", server);
		MUST(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect to %s", server);
		sock = fd;
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	MUST(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 1) == 0, "listen");
	sock = accept(fd, NULL, NULL);
	MUST(sock >= 0, "accept");
	close(fd);
}

/* poll_one waits (bounded) for one completion of cq. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			return 0;
	}
}

static struct ibv_qp *make_qp(enum ibv_qp_type type, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = type,
				     .cap = {.max_send_wr = 16, .max_recv_wr = srq ? 0 : 16, .max_send_sge = 2,
					     .max_recv_sge = 2}};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	MUST(qp, "create %d QP", type);
	CHECK(a.cap.max_send_wr >= 16 && a.cap.max_send_sge >= 2, "caps written back: %u %u", a.cap.max_send_wr,
	      a.cap.max_send_sge);
	return qp;
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
				.qkey = 0x11111111};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	MUST(ibv_modify_qp(qp, &a, mask) == 0, "INIT");
}

static void connect_upto(struct ibv_qp *qp, uint32_t remote, const union ibv_gid *dgid, enum ibv_qp_state last);

/* connect moves qp to RTS towards remote (RC/UC) or to RTS (UD). */
static void connect_qp(struct ibv_qp *qp, uint32_t remote, const union ibv_gid *dgid)
{
	connect_upto(qp, remote, dgid, IBV_QPS_RTS);
}

/* connect_upto moves qp towards remote up to last (RTR or RTS). */
static void connect_upto(struct ibv_qp *qp, uint32_t remote, const union ibv_gid *dgid, enum ibv_qp_state last)
{
	to_init(qp);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = remote, .rq_psn = 7,
				.max_dest_rd_atomic = 4, .min_rnr_timer = 1,
				.ah_attr = {.is_global = 1, .port_num = 1,
					    .grh = {.dgid = *dgid, .sgid_index = gid_index, .hop_limit = 64}}};
	int mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	/* the kernel's table: an XRC target takes RC's responder attributes, an initiator
	 * its requester ones */
	if (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	MUST(ibv_modify_qp(qp, &a, mask) == 0, "RTR");
	if (last == IBV_QPS_RTR)
		return;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_SEND)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (qp->qp_type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_TIMEOUT;
	MUST(ibv_modify_qp(qp, &a, mask) == 0, "RTS");
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, struct ibv_mr *mr, void *buf, uint32_t len, uint64_t raddr,
		uint32_t rkey, int flags)
{
	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = op + 100, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = flags, .imm_data = htobe32(0xC0FFEE)},
			   *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, void *buf, uint32_t len, uint64_t id)
{
	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static void device_and_queries(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	MUST(list && n == 1, "one device, got %d", n);
	CHECK(strcmp(ibv_get_device_name(list[0]), "rocelab0") == 0, "name %s", ibv_get_device_name(list[0]));
	CHECK(ibv_get_device_guid(list[0]) != 0, "node GUID");
	ctx = ibv_open_device(list[0]);
	MUST(ctx, "open");
	/* the device is made once, as rdma-core's: a program asking for the list again
	 * and again (a monitor's loop) gets the same device and holds no more memory */
	int same = 1;
	for (int i = 0; i < 100; i++) {
		struct ibv_device **again = ibv_get_device_list(NULL);
		same &= again && again[0] == list[0];
		ibv_free_device_list(again);
	}
	CHECK(same, "the device list asked for 100 more times: the same device each time");
	ibv_free_device_list(list);

	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && da.phys_port_cnt == 1 && da.max_qp_wr > 0, "query_device");
	struct ibv_device_attr_ex dx;
	CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && dx.orig_attr.max_qp == da.max_qp, "query_device_ex");
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE && pa.link_layer == IBV_LINK_LAYER_ETHERNET &&
		      pa.gid_tbl_len >= 2,
	      "query_port state %d link %d gids %d", pa.state, pa.link_layer, pa.gid_tbl_len);
	errno = 0;
	CHECK(ibv_query_port(ctx, 2, &pa) == EINVAL, "port 2 does not exist");
	CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0 && gid.raw[10] == 0xff && gid.raw[11] == 0xff,
	      "GID 1 is IPv4-mapped");
	union ibv_gid g;
	CHECK(ibv_query_gid(ctx, 1, pa.gid_tbl_len, &g) == -1 && errno == EINVAL, "GID past the table");
	struct ibv_gid_entry e;
	CHECK(ibv_query_gid_ex(ctx, 1, gid_index, &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		      memcmp(e.gid.raw, gid.raw, 16) == 0 && e.ndev_ifindex > 0,
	      "query_gid_ex type %u ifindex %u", e.gid_type, e.ndev_ifindex);
	struct ibv_gid_entry tab[16];
	ssize_t k = ibv_query_gid_table(ctx, tab, 16, 0);
	CHECK(k == 3 && tab[gid_index].gid_index == (uint32_t)gid_index, "query_gid_table: the 3 addresses, %zd", k);
	/* rxe's table: 1024 entries, the ones past the addresses empty */
	CHECK(pa.gid_tbl_len == 1024, "gid_tbl_len %d (rxe 1024)", pa.gid_tbl_len);
	memset(&g, 0xff, sizeof(g));
	CHECK(ibv_query_gid(ctx, 1, 3, &g) == 0 && g.global.subnet_prefix == 0 && g.global.interface_id == 0,
	      "an empty GID entry reads as zeros");
	CHECK(ibv_query_gid_ex(ctx, 1, 3, &e, 0) == ENODATA, "query_gid_ex of an empty entry: ENODATA");
	CHECK(ibv_query_gid_table(ctx, tab, 2, 0) == -EINVAL, "query_gid_table with room for 2 of 3");
	__be16 pkey;
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && be16toh(pkey) == 0xffff, "pkey 0");
	CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1, "pkey 1 does not exist");
	CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)) == 0, "pkey index");
	CHECK(ibv_fork_init() == 0, "fork_init");
}

/* async_event waits for the next asynchronous event with poll on the async fd (at
 * most 5 s), takes and acknowledges it, and returns its type, or -1. */
static int async_event(struct ibv_async_event *ev)
{
	struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
	memset(ev, 0, sizeof(*ev));
	if (poll(&pfd, 1, 5000) != 1 || ibv_get_async_event(ctx, ev))
		return -1;
	ibv_ack_async_event(ev);
	return ev->event_type;
}

static void rc_tests(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	MUST(ch, "comp channel");
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 0, NULL, NULL, 0) && errno == EINVAL, "CQ of 0 entries");
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, (void *)0x1234, ch, 0);
	MUST(cq, "CQ");
	CHECK(cq->cqe >= 64, "cqe %d", cq->cqe);

	/* the app's own memory: malloc'd, deliberately not page-aligned */
	char *a = malloc(10000), *b = malloc(10000);
	char *abuf = a + 100, *bbuf = b + 200;
	memset(abuf, 'a', 4096);
	memset(bbuf, 'b', 4096);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, abuf, 0, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "MR of 0 bytes");
	CHECK(!ibv_reg_mr(pd, abuf, 4096, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "remote write without local write");
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *ma = ibv_reg_mr(pd, abuf, 4096, acc), *mb = ibv_reg_mr(pd, bbuf, 4096, acc);
	MUST(ma && mb, "MRs");
	CHECK(ma->addr == abuf && ma->length == 4096 && ma->lkey && ma->rkey, "MR fields");
	CHECK(abuf[0] == 'a' && abuf[4095] == 'a' && bbuf[0] == 'b', "contents survive registration");
	struct ibv_mr *mi = ibv_reg_mr_iova2(pd, bbuf, 4096, 0x10000, acc);
	CHECK(mi != NULL, "reg_mr_iova2");

	struct ibv_qp *qp = make_qp(IBV_QPT_RC, cq, NULL);
	struct ibv_qp_attr bad = {.qp_state = IBV_QPS_RTS};
	CHECK(ibv_modify_qp(qp, &bad, IBV_QP_STATE) == EINVAL, "RESET -> RTS is not a transition");
	struct peer p = exchange(qp->qp_num, mb, bbuf, mi);
	connect_qp(qp, p.qpn, &p.gid);
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	CHECK(ibv_query_qp(qp, &qattr, IBV_QP_STATE | IBV_QP_DEST_QPN, &qinit) == 0 && qattr.qp_state == IBV_QPS_RTS &&
		      qattr.dest_qp_num == p.qpn && qattr.path_mtu == IBV_MTU_1024 && qinit.qp_type == IBV_QPT_RC,
	      "query_qp state %d dest %u", qattr.qp_state, qattr.dest_qp_num);
	barrier();
	struct ibv_wc wc;
	if (is_client) {
		/* RDMA WRITE into the server's malloc'd buffer, directly and through the iova MR */
		CHECK(post(qp, IBV_WR_RDMA_WRITE, ma, abuf, 4096, p.addr, p.rkey, IBV_SEND_SIGNALED) == 0, "post WRITE");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE &&
			      wc.wr_id == IBV_WR_RDMA_WRITE + 100,
		      "WRITE completion status %d", wc.status);
		memset(abuf, 'i', 16);
		CHECK(post(qp, IBV_WR_RDMA_WRITE, ma, abuf, 16, 0x10000 + 8, p.rkey_iova, IBV_SEND_SIGNALED) == 0, "post WRITE via iova");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "WRITE via iova: status %d", wc.status);
		/* out of bounds: a remote access error (and both QPs go to the error state) */
		CHECK(post(qp, IBV_WR_RDMA_WRITE, ma, abuf, 64, p.addr + 8192, p.rkey, IBV_SEND_SIGNALED) == 0, "post bad WRITE");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR,
		      "out-of-bounds WRITE: status %d (%s)", wc.status, ibv_wc_status_str(wc.status));
	}
	barrier();
	if (!is_client)
		CHECK(bbuf[0] == 'a' && bbuf[4095] == 'a' && bbuf[8] == 'i' && bbuf[23] == 'i' && bbuf[7] == 'a' &&
			      bbuf[24] == 'a',
		      "the WRITEs landed in the app's buffer");
	/* the remote access error put both QPs in the error state by themselves */
	struct ibv_async_event ev;
	CHECK(async_event(&ev) == IBV_EVENT_QP_FATAL && ev.element.qp == qp,
	      "QP_FATAL for the QP the access error broke, through a pollable async fd: event %d",
	      ev.event_type);
	CHECK(ibv_destroy_qp(qp) == 0, "destroy QP");

	qp = make_qp(IBV_QPT_RC, cq, NULL);
	p = exchange(qp->qp_num, mb, bbuf, NULL);
	connect_qp(qp, p.qpn, &p.gid);
	uint64_t *counter = (uint64_t *)(bbuf + 1024), *old = (uint64_t *)(abuf + 1024);
	if (!is_client) {
		/* SEND with immediate, event-driven */
		CHECK(post_recv(qp, mb, bbuf, 4096, 77) == 0, "post_recv");
		CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify");
		memset(bbuf + 2048, 'r', 64);
		*counter = 40;
		barrier();
		struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
		CHECK(poll(&pfd, 1, 10000) == 1, "the channel fd becomes readable");
		struct ibv_cq *ecq;
		void *ectx;
		CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == 0 && ecq == cq && ectx == (void *)0x1234, "get_cq_event");
		ibv_ack_cq_events(cq, 1);
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == 77 &&
			      wc.byte_len == 100 && (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0xC0FFEE &&
			      wc.qp_num == qp->qp_num && bbuf[99] == 's',
		      "SEND with immediate received: status %d opcode %d len %u flags %#x imm %#x qp %u/%u src %u/%u",
		      wc.status, wc.opcode, wc.byte_len, wc.wc_flags, be32toh(wc.imm_data), wc.qp_num, qp->qp_num, wc.src_qp,
		      p.qpn);
		barrier();
		CHECK(*counter == 7, "the atomics changed the app's memory: %llu", (unsigned long long)*counter);
	} else {
		memset(abuf, 's', 100);
		barrier();
		CHECK(post(qp, IBV_WR_SEND_WITH_IMM, ma, abuf, 100, 0, 0, IBV_SEND_SIGNALED) == 0, "post SEND");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "SEND completes");
		CHECK(post(qp, IBV_WR_RDMA_READ, ma, abuf, 64, p.addr + 2048, p.rkey, IBV_SEND_SIGNALED) == 0, "post READ");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ &&
			      abuf[0] == 'r' && abuf[63] == 'r',
		      "READ");
		struct ibv_sge s = {.addr = (uintptr_t)old, .length = 8, .lkey = ma->lkey};
		struct ibv_send_wr wr = {.wr_id = 9, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					 .send_flags = IBV_SEND_SIGNALED},
				   *badwr;
		wr.wr.atomic.remote_addr = p.addr + 1024;
		wr.wr.atomic.rkey = p.rkey;
		wr.wr.atomic.compare_add = 2;
		CHECK(ibv_post_send(qp, &wr, &badwr) == 0, "post FETCH_ADD");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD && *old == 40,
		      "FETCH_ADD");
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 42;
		wr.wr.atomic.swap = 7;
		CHECK(ibv_post_send(qp, &wr, &badwr) == 0, "post CMP_SWP");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP && *old == 42,
		      "CMP_SWP");
		barrier();
		CHECK(post(qp, IBV_WR_TSO, ma, abuf, 8, 0, 0, IBV_SEND_SIGNALED) == EOPNOTSUPP, "TSO is not supported");
		/* a send queue of 16: an unsignaled post soon finds it full */
		int rc = 0, posted = 0;
		for (; posted < 256 && rc == 0; posted++)
			rc = post(qp, IBV_WR_RDMA_WRITE, ma, abuf, 8, p.addr, p.rkey, 0);
		CHECK(rc == ENOMEM && posted > 16, "a full send queue: %d after %d posts", rc, posted);
	}
	barrier();
	/* objects in use */
	CHECK(ibv_destroy_cq(cq) == EBUSY, "a CQ with QPs is busy");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "a PD with objects is busy");
	CHECK(ibv_destroy_qp(qp) == 0, "destroy QP");
	CHECK(ibv_dereg_mr(mi) == 0 && ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0, "dereg");
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "a channel with CQs is busy");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy CQ");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy channel");
	free(a);
	free(b);
}

static void wr_api_and_inline(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *buf = aligned_alloc(4096, 8192);
	memset(buf, 0, 8192);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	MUST(cq && mr, "CQ and MR");
	struct ibv_qp_init_attr_ex x = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
					.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND,
					.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1,
						.max_inline_data = 64}};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &x);
	MUST(qp, "create_qp_ex");
	CHECK(x.cap.max_inline_data >= 64, "inline %u", x.cap.max_inline_data);
	struct peer p = exchange(qp->qp_num, mr, buf, NULL);
	connect_qp(qp, p.qpn, &p.gid);
	barrier();
	if (is_client) {
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
		MUST(qx, "qp_to_qp_ex");
		memset(buf, 'w', 32);
		ibv_wr_start(qx);
		qx->wr_id = 5;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qx, p.rkey, p.addr + 4096);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 32);
		CHECK(ibv_wr_complete(qx) == 0, "wr_complete");
		struct ibv_wc wc;
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 5, "ibv_wr_rdma_write");
		/* inline: the source is reused at once */
		char src[40];
		memset(src, 'n', sizeof(src));
		struct ibv_sge s = {.addr = (uintptr_t)src, .length = sizeof(src)};
		struct ibv_send_wr wr = {.wr_id = 6, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE},
				   *bad;
		wr.wr.rdma.remote_addr = p.addr + 6000;
		wr.wr.rdma.rkey = p.rkey;
		CHECK(ibv_post_send(qp, &wr, &bad) == 0, "inline post");
		memset(src, 'X', sizeof(src));
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "inline WRITE");
		struct ibv_qp_init_attr plain = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
						 .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
		struct ibv_qp *noinline = ibv_create_qp(pd, &plain);
		CHECK(noinline && ibv_post_send(noinline, &wr, &bad) == EINVAL && bad == &wr,
		      "inline on a QP without inline room");
		CHECK(ibv_qp_to_qp_ex(noinline) == NULL, "a QP created without send ops has no ibv_qp_ex");
		ibv_destroy_qp(noinline);
		/* builders the device lacks fail the batch */
		ibv_wr_start(qx);
		ibv_wr_send_tso(qx, NULL, 0, 0);
		CHECK(ibv_wr_complete(qx) == EOPNOTSUPP, "ibv_wr_send_tso is not supported");
	}
	barrier();
	if (!is_client)
		CHECK(buf[4096] == 'w' && buf[4096 + 31] == 'w' && buf[4096 + 32] == 0 && buf[6000] == 'n' &&
			      buf[6039] == 'n' && buf[6040] == 0,
		      "ibv_wr_rdma_write and the inline WRITE landed");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
}

static void ud_and_srq(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *buf = malloc(16384);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 16384, IBV_ACCESS_LOCAL_WRITE);
	MUST(cq && mr, "CQ and MR");
	struct ibv_qp *ud = make_qp(IBV_QPT_UD, cq, NULL);
	connect_qp(ud, 0, &gid);
	struct peer p = exchange(ud->qp_num, NULL, NULL, NULL);
	struct ibv_wc wc;
	if (!is_client) {
		/* the receive buffer is on the main thread's stack */
		char stack_buf[40 + 512];
		struct ibv_mr *smr = ibv_reg_mr(pd, stack_buf, sizeof(stack_buf), IBV_ACCESS_LOCAL_WRITE);
		MUST(smr, "ibv_reg_mr of a buffer on the main thread's stack");
		CHECK(post_recv(ud, smr, stack_buf, sizeof(stack_buf), 1) == 0, "UD recv");
		barrier();
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
			      wc.byte_len == 40 + 512 && (wc.wc_flags & IBV_WC_GRH) && wc.src_qp == p.qpn &&
			      stack_buf[40] == 'u' && stack_buf[40 + 511] == 'u',
		      "UD SEND received into the stack buffer with its GRH: status %d len %u src %u", wc.status, wc.byte_len,
		      wc.src_qp);
		struct ibv_ah_attr back;
		CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)stack_buf, &back) == 0 &&
			      memcmp(back.grh.dgid.raw, p.gid.raw, 16) == 0 && back.grh.sgid_index == gid_index,
		      "init_ah_from_wc");
		struct ibv_ah *reply = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)stack_buf, 1);
		CHECK(reply && ibv_destroy_ah(reply) == 0, "create_ah_from_wc");
		CHECK(ibv_dereg_mr(smr) == 0, "dereg the stack buffer's MR");
	} else {
		struct ibv_ah_attr aa = {.is_global = 0, .port_num = 1};
		errno = 0;
		CHECK(!ibv_create_ah(pd, &aa) && errno == EINVAL, "an AH without GRH on RoCE");
		aa.is_global = 1;
		aa.grh.dgid = p.gid;
		aa.grh.sgid_index = gid_index;
		aa.grh.hop_limit = 64;
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		MUST(ah, "AH");
		barrier();
		memset(buf, 'u', 512);
		struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 512, .lkey = mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = p.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
		CHECK(ibv_post_send(ud, &wr, &bad) == 0, "UD send");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "UD send completes");
		wr.wr.ud.ah = NULL;
		CHECK(ibv_post_send(ud, &wr, &bad) == EINVAL, "a UD send without an AH");
		CHECK(ibv_destroy_ah(ah) == 0, "destroy AH");
	}
	barrier();
	ibv_destroy_qp(ud);

	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp;
	if (!is_client) {
		struct ibv_srq_init_attr si = {.attr = {.max_wr = 32, .max_sge = 1}};
		srq = ibv_create_srq(pd, &si);
		MUST(srq, "SRQ");
		struct ibv_srq_attr sa;
		CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr >= 32, "query_srq");
		sa.srq_limit = 4;
		CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "modify_srq limit");
	}
	qp = make_qp(IBV_QPT_RC, cq, srq);
	p = exchange(qp->qp_num, NULL, NULL, NULL);
	/* the server's QP stays in RTR: the client's SEND raises COMM_EST there */
	connect_upto(qp, p.qpn, &p.gid, is_client ? IBV_QPS_RTS : IBV_QPS_RTR);
	if (!is_client) {
		struct ibv_sge rs = {.addr = (uintptr_t)buf + 4096, .length = 4096, .lkey = mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 3, .sg_list = &rs, .num_sge = 1}, *rbad;
		CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, "post_srq_recv");
		CHECK(ibv_post_recv(qp, &rwr, &rbad) != 0, "post_recv on a QP with an SRQ");
		barrier();
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 && wc.byte_len == 100,
		      "SEND received through the SRQ");
		struct ibv_async_event ev;
		CHECK(async_event(&ev) == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq,
		      "SRQ_LIMIT_REACHED below the limit of 4: event %d", ev.event_type);
		CHECK(async_event(&ev) == IBV_EVENT_COMM_EST && ev.element.qp == qp,
		      "COMM_EST for the QP in RTR that received a SEND: event %d", ev.event_type);
		CHECK(ibv_destroy_srq(srq) == EBUSY, "an SRQ with QPs is busy");
		struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
		CHECK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0 && async_event(&ev) == IBV_EVENT_QP_LAST_WQE_REACHED &&
			      ev.element.qp == qp,
		      "QP_LAST_WQE_REACHED for a QP of the SRQ moved to ERR: event %d", ev.event_type);
	} else {
		barrier();
		CHECK(post(qp, IBV_WR_SEND, mr, buf, 100, 0, 0, IBV_SEND_SIGNALED) == 0, "SEND to the SRQ");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "SEND to the SRQ completes");
	}
	barrier();
	ibv_destroy_qp(qp);
	if (srq)
		CHECK(ibv_destroy_srq(srq) == 0, "destroy SRQ");
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
}

/* rxe_parity checks the verbs whose answers rxe gives and rocelab once did not. */
static void rxe_parity(void)
{
	struct ibv_device_attr_ex dx;
	CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && dx.phys_port_cnt_ex == 1, "phys_port_cnt_ex %u",
	      dx.phys_port_cnt_ex);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0 && pa.max_mtu == IBV_MTU_4096 && pa.active_mtu == IBV_MTU_1024 &&
		      pa.max_msg_sz == 1u << 23,
	      "port: max_mtu %d (rxe 4096), active_mtu %d (the link's 1500), max_msg_sz %u (rxe 8 MiB)", pa.max_mtu,
	      pa.active_mtu, pa.max_msg_sz);

	/* UCX passes flow label 0xffffffff; rxe keeps it (the GRH takes 20 bits) */
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
				 .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64, .flow_label = 0xffffffff}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "AH with flow label 0xffffffff");
	if (ah)
		ibv_destroy_ah(ah);

	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	char *buf = malloc(64);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
	MUST(cq && buf && mr, "CQ and MR");

	/* a send-only RC QP: max_recv_wr 0, whose receive queue is always full */
	struct ibv_qp_init_attr so = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &so);
	CHECK(qp && so.cap.max_recv_wr == 0, "RC QP with max_recv_wr 0: cap %u", so.cap.max_recv_wr);
	if (qp) {
		to_init(qp);
		errno = 0;
		CHECK(post_recv(qp, mr, buf, 64, 1) == ENOMEM, "receive on a send-only QP: queue full");
		ibv_destroy_qp(qp);
	}

	/* ibv_create_qp_ex with the CREATE_FLAGS bit: flags 0 is fine, rxe supports none */
	struct ibv_qp_init_attr_ex x = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
					.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
					.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	qp = ibv_create_qp_ex(ctx, &x);
	CHECK(qp, "create_qp_ex with create flags 0");
	x.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &x) && errno == EOPNOTSUPP, "create flag SCATTER_FCS: EOPNOTSUPP as rxe");

	/* posting by state, as rxe: receives from INIT on, sends from RTS on */
	if (qp) {
		CHECK(post(qp, IBV_WR_SEND, mr, buf, 8, 0, 0, IBV_SEND_SIGNALED) == EINVAL, "send in RESET: EINVAL");
		CHECK(post_recv(qp, mr, buf, 64, 1) == EINVAL, "receive in RESET: EINVAL");
		to_init(qp);
		CHECK(post(qp, IBV_WR_SEND, mr, buf, 8, 0, 0, IBV_SEND_SIGNALED) == EINVAL, "send in INIT: EINVAL");
		CHECK(post_recv(qp, mr, buf, 64, 1) == 0, "receive in INIT");
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = qp->qp_num,
					.rq_psn = 1, .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
					.ah_attr = {.is_global = 1, .port_num = 1,
						    .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}}};
		CHECK(ibv_modify_qp(qp, &a,
				    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
		      "RTR with path MTU 4096 (the port's max_mtu)");
		struct ibv_qp_init_attr ia;
		CHECK(ibv_query_qp(qp, &a, IBV_QP_PATH_MTU, &ia) == 0 && a.path_mtu == pa.active_mtu,
		      "path MTU above the link's is the active MTU: %d", a.path_mtu);
		CHECK(post(qp, IBV_WR_SEND, mr, buf, 8, 0, 0, IBV_SEND_SIGNALED) == EINVAL, "send in RTR: EINVAL");
		ibv_destroy_qp(qp);
	}
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
}

/* ud_self is a UD QP of cq (and srq) in RTS with an AH to itself. */
static struct ibv_qp *ud_self(struct ibv_cq *cq, struct ibv_srq *srq, struct ibv_ah **ah)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_UD, cq, srq);
	connect_qp(qp, 0, &gid);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}};
	*ah = ibv_create_ah(pd, &aa);
	MUST(*ah, "AH to itself");
	return qp;
}

static int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, struct ibv_mr *mr, void *buf, uint64_t id)
{
	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	return ibv_post_send(qp, &wr, &bad);
}

/* resize_and_rereg checks ibv_resize_cq, ibv_modify_srq(IBV_SRQ_MAX_WR) and ibv_rereg_mr:
 * what was queued survives a resize, the new size holds, and a region moved to another
 * PD is out of reach of the old PD's QPs. */
static void resize_and_rereg(void)
{
	char *buf = malloc(4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	MUST(buf && mr && ch && cq, "CQ and MR");

	/* sends not yet completed need their room as much as completions held: an RC QP
	 * towards a QPN nobody has keeps its three signaled SENDs outstanding for seconds */
	struct ibv_cq *owing = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	MUST(owing, "CQ of 4");
	struct ibv_qp *lost = make_qp(IBV_QPT_RC, owing, NULL);
	connect_qp(lost, 0xfffff0, &gid);
	for (int i = 0; i < 3; i++)
		CHECK(post(lost, IBV_WR_SEND, mr, buf, 64, 0, 0, IBV_SEND_SIGNALED) == 0, "send %d to nobody", i);
	CHECK(ibv_resize_cq(owing, 1) == EINVAL, "resize_cq(1) under three outstanding sends: EINVAL");
	CHECK(ibv_resize_cq(owing, 3) == 0, "resize_cq(3) under three outstanding sends");
	ibv_destroy_qp(lost);
	ibv_destroy_cq(owing);

	/* a CQ resized while it holds completions keeps them, and its events go on */
	struct ibv_ah *ah;
	struct ibv_qp *qp = ud_self(cq, NULL, &ah);
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "arm");
	for (int i = 0; i < 3; i++)
		CHECK(ud_send(qp, ah, mr, buf + 3000, 1 + i) == 0, "send %d", i);
	struct ibv_cq *ev;
	void *evctx;
	CHECK(ibv_get_cq_event(ch, &ev, &evctx) == 0 && ev == cq, "event before the resize");
	ibv_ack_cq_events(cq, 1);
	errno = 0;
	CHECK(ibv_resize_cq(cq, 0) == EINVAL, "resize_cq(0): EINVAL");
	CHECK(ibv_resize_cq(cq, 64) == 0 && cq->cqe >= 64, "resize_cq(64): cqe %d", cq->cqe);
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "arm the resized CQ");
	for (int i = 3; i < 12; i++)
		CHECK(ud_send(qp, ah, mr, buf + 3000, 1 + i) == 0, "send %d after resize", i);
	CHECK(ibv_get_cq_event(ch, &ev, &evctx) == 0 && ev == cq, "event after the resize");
	ibv_ack_cq_events(cq, 1);
	struct ibv_wc wc;
	int sends = 0;
	for (int i = 0; i < 12 && poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)1 + i; i++)
		sends++;
	CHECK(sends == 12, "12 send completions in order through the resized CQ: %d", sends);

	/* ibv_rereg_mr: access and PD change, the keys stay; rxe changes no translation */
	uint32_t lkey = mr->lkey;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0 &&
		      mr->lkey == lkey,
	      "rereg_mr(CHANGE_ACCESS)");
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 64, 0) == IBV_REREG_MR_ERR_CMD &&
		      errno == EOPNOTSUPP,
	      "rereg_mr(CHANGE_TRANSLATION): not in rxe either");
	errno = 0;
	CHECK(ibv_rereg_mr(mr, 0x100, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, "unknown flag");
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) ==
			      IBV_REREG_MR_ERR_CMD &&
		      errno == EINVAL,
	      "remote write without local write: EINVAL");
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	MUST(pd2, "second PD");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0 && mr->pd == pd2, "rereg_mr(CHANGE_PD)");
	errno = 0;
	CHECK(ibv_dealloc_pd(pd2) == EBUSY, "the new PD holds the MR");
	CHECK(ud_send(qp, ah, mr, buf + 3000, 99) == 0, "send with an MR of another PD");
	CHECK(poll_one(cq, &wc) == 1 && wc.wr_id == 99 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "the old PD's QP lost the MR: status %d", wc.status);
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0) == 0 && mr->pd == pd, "rereg_mr back");
	CHECK(ibv_dealloc_pd(pd2) == 0, "dealloc the second PD");
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);

	/* an SRQ resized while it holds receives keeps them: the server's SRQ takes four,
	 * grows to 16 and takes eight more, and the client's twelve SENDs consume all */
	struct ibv_srq *srq = NULL;
	if (!is_client) {
		struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
		srq = ibv_create_srq(pd, &sa);
		MUST(srq, "SRQ of 4");
		struct ibv_recv_wr rw = {.num_sge = 1}, *rbad;
		struct ibv_sge rs = {.length = 128, .lkey = mr->lkey};
		rw.sg_list = &rs;
		for (int i = 0; i < 12; i++) {
			if (i == 4) {
				rw.wr_id = 1999;
				CHECK(ibv_post_srq_recv(srq, &rw, &rbad) == ENOMEM, "a full SRQ: ENOMEM");
				struct ibv_srq_attr sx = {.max_wr = 16};
				CHECK(ibv_modify_srq(srq, &sx, IBV_SRQ_MAX_WR) == 0, "modify_srq(MAX_WR 16)");
				CHECK(ibv_query_srq(srq, &sx) == 0 && sx.max_wr >= 16, "query_srq after resize: %u", sx.max_wr);
			}
			rw.wr_id = 1000 + i;
			rs.addr = (uintptr_t)buf + 128 * i;
			CHECK(ibv_post_srq_recv(srq, &rw, &rbad) == 0, "SRQ receive %d", i);
		}
		struct ibv_srq_attr sx = {.max_wr = 2};
		errno = 0;
		CHECK(ibv_modify_srq(srq, &sx, IBV_SRQ_MAX_WR) == EINVAL, "SRQ shrunk below its WRs: EINVAL");
	}
	qp = make_qp(IBV_QPT_UD, cq, srq);
	connect_qp(qp, 0, &gid);
	struct peer p = exchange(qp->qp_num, NULL, NULL, NULL);
	if (is_client) {
		struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
					 .grh = {.dgid = p.gid, .sgid_index = gid_index, .hop_limit = 64}};
		ah = ibv_create_ah(pd, &aa);
		MUST(ah, "AH to the server");
		int ok = 0;
		for (int i = 0; i < 12; i++) {
			struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
			struct ibv_send_wr wr = {.wr_id = i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = p.qpn;
			wr.wr.ud.remote_qkey = 0x11111111;
			ok += ibv_post_send(qp, &wr, &bad) == 0 && poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS;
		}
		CHECK(ok == 12, "12 UD SENDs to the server's SRQ: %d", ok);
		ibv_destroy_ah(ah);
	} else {
		uint32_t seen = 0;
		for (int i = 0; i < 12 && poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS; i++)
			if (wc.wr_id >= 1000 && wc.wr_id < 1012)
				seen |= 1u << (wc.wr_id - 1000);
		CHECK(seen == 0xfff, "the 12 receives, 4 from before the resize, completed: %#x", seen);
	}
	barrier();
	ibv_destroy_qp(qp);
	if (srq)
		CHECK(ibv_destroy_srq(srq) == 0, "destroy the resized SRQ");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy the resized CQ");
	ibv_destroy_comp_channel(ch);
	ibv_dereg_mr(mr);
	free(buf);
}

/* memory_windows runs on the local device alone: two RC QPs connected through the
 * port's loopback, remote access through type 1 and type 2 windows, their
 * invalidation, and the errors rxe gives. */
static void memory_windows(void)
{
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
		      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && da.max_mw > 0,
	      "MW caps: flags %#x, max_mw %d", da.device_cap_flags, da.max_mw);
	errno = 0;
	CHECK(!ibv_alloc_mw(pd, 3) && errno == EINVAL, "MW of type 3: EINVAL (errno %d)", errno);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	MUST(cq, "MW CQ");
	struct ibv_qp *a = make_qp(IBV_QPT_RC, cq, NULL), *b = make_qp(IBV_QPT_RC, cq, NULL);
	connect_qp(a, b->qp_num, &gid);
	connect_qp(b, a->qp_num, &gid);
	static char src[4096], dst[8192];
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	MUST(smr && dmr, "MW MRs");
	memset(src, 0x5A, sizeof(src));
	struct ibv_wc wc;

	/* type 1: ibv_bind_mw, then a WRITE through its rkey */
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	MUST(mw1, "alloc type 1 MW");
	uint32_t before = mw1->rkey;
	struct ibv_mw_bind bind = {.wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
				   .bind_info = {.mr = dmr, .addr = (uintptr_t)dst, .length = 4096,
						 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
	CHECK(ibv_bind_mw(b, mw1, &bind) == 0 && mw1->rkey == ibv_inc_rkey(before), "bind type 1: rkey %#x", mw1->rkey);
	CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "bind completion %d %d",
	      wc.status, wc.opcode);
	CHECK(post(a, IBV_WR_RDMA_WRITE, smr, src, 512, (uintptr_t)dst + 100, mw1->rkey, IBV_SEND_SIGNALED) == 0 &&
		      poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && dst[100] == 0x5A && dst[611] == 0x5A &&
		      dst[612] == 0,
	      "WRITE through a type 1 MW: %d", wc.status);
	CHECK(ibv_dereg_mr(dmr) == EINVAL, "dereg an MR with a bound MW: EINVAL");
	struct ibv_mw_bind nomr = {.bind_info = {.length = 64}};
	CHECK(ibv_bind_mw(b, mw1, &nomr) == EINVAL, "bind a length without an MR: EINVAL");
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_mr *other = ibv_reg_mr(pd2, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw_bind wrongpd = {.bind_info = {.mr = other, .addr = (uintptr_t)src, .length = 64}};
	CHECK(ibv_bind_mw(b, mw1, &wrongpd) == EPERM, "bind an MR of another PD: EPERM");
	CHECK(ibv_dereg_mr(other) == 0 && ibv_dealloc_pd(pd2) == 0, "release the other PD");
	CHECK(ibv_dealloc_mw(mw1) == 0, "dealloc type 1 MW");

	/* type 2: BIND_MW WR, LOCAL_INV, then the old rkey fails the requester */
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	MUST(mw2, "alloc type 2 MW");
	uint32_t rkey2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr wr = {.wr_id = 2, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = rkey2;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = dmr, .addr = (uintptr_t)dst + 4096, .length = 4096,
							  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
	CHECK(ibv_post_send(b, &wr, &bad) == 0 && poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_BIND_MW,
	      "bind type 2: %d", wc.status);
	CHECK(post(a, IBV_WR_RDMA_WRITE, smr, src, 64, (uintptr_t)dst + 4096, rkey2, IBV_SEND_SIGNALED) == 0 &&
		      poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && dst[4096] == 0x5A,
	      "WRITE through a type 2 MW: %d", wc.status);
	struct ibv_send_wr inv = {.wr_id = 3, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = rkey2};
	CHECK(ibv_post_send(b, &inv, &bad) == 0 && poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_LOCAL_INV,
	      "LOCAL_INV: %d", wc.status);
	CHECK(post(a, IBV_WR_RDMA_WRITE, smr, src, 64, (uintptr_t)dst + 4096, rkey2, IBV_SEND_SIGNALED) == 0 &&
		      poll_one(cq, &wc) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "WRITE through an invalidated MW: REM_ACCESS_ERR, got %d", wc.status);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	CHECK(ibv_dealloc_mw(mw2) == 0, "dealloc type 2 MW");
	CHECK(ibv_dereg_mr(dmr) == 0 && ibv_dereg_mr(smr) == 0, "dereg the MW MRs");
	ibv_destroy_cq(cq);
}

static struct ibv_xrcd *open_xrcd(int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = fd,
				       .oflags = oflags};
	errno = 0;
	return ibv_open_xrcd(ctx, &a);
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {.attr = {.max_wr = 8, .max_sge = 1},
					 .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
						      IBV_SRQ_INIT_ATTR_CQ,
					 .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd, .cq = cq};
	errno = 0;
	return ibv_create_srq_ex(ctx, &a);
}

static struct ibv_qp *xrc_recv_qp(struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};
	errno = 0;
	return ibv_create_qp_ex(ctx, &a);
}

/* xrc_peer is verbs_check xrc-peer FILE QPN: a second process of the host opens the
 * domain of FILE, opens the target QP QPN through it and makes an XRC SRQ of its own
 * there, prints the SRQ's number, and checks that the SEND the first process sends
 * through its target into that SRQ arrives. It prints its checks and the failures. */
static int xrc_peer(const char *path, uint32_t qpn)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	MUST(list && list[0] && (ctx = ibv_open_device(list[0])), "peer: open the device");
	ibv_free_device_list(list);
	MUST(pd = ibv_alloc_pd(ctx), "peer: PD");
	int fd = open(path, O_RDONLY);
	struct ibv_xrcd *x = open_xrcd(fd, 0);
	MUST(x, "peer: open_xrcd of the first process's file without O_CREAT");
	struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
				      .qp_num = qpn, .xrcd = x, .qp_type = IBV_QPT_XRC_RECV};
	struct ibv_qp *q = ibv_open_qp(ctx, &oa);
	CHECK(q && q->qp_num == qpn, "peer: open_qp of the first process's target %#x", qpn);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq *srq = cq ? xrc_srq(x, cq) : NULL;
	uint32_t n = 0;
	MUST(srq && ibv_get_srq_num(srq, &n) == 0, "peer: an XRC SRQ in the shared domain");
	static char buf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr ? mr->lkey : 0};
	struct ibv_recv_wr rwr = {.wr_id = 55, .sg_list = &s, .num_sge = 1}, *bad;
	MUST(mr && ibv_post_srq_recv(srq, &rwr, &bad) == 0, "peer: post to its SRQ");
	printf("srqn %u\n", n);
	fflush(stdout);
	struct ibv_wc wc;
	CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 55 && wc.byte_len == 40 &&
		      wc.qp_num == qpn && buf[39] == 0x3C,
	      "peer: the first process's SEND arrived through its target on this process's CQ: status %d, %u bytes",
	      wc.status, wc.byte_len);
	CHECK(ibv_close_xrcd(x) == EBUSY, "peer: close_xrcd with its SRQ and opened QP: EBUSY");
	CHECK(ibv_destroy_qp(q) == 0 && ibv_destroy_srq(srq) == 0 && ibv_close_xrcd(x) == 0,
	      "peer: destroy the opened QP and the SRQ, close the XRCD");
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	close(fd);
	printf("peer failures %d\n", failures);
	return failures != 0;
}

/* xrc_second_process runs xrc_peer in a process of its own and sends into its SRQ
 * through target tgt: a domain shared by file between processes, a QP opened by one
 * that another created, an SRQ whose completions a QP of another process delivers. */
static void xrc_second_process(const char *path, uint32_t tgt, struct ibv_qp *ini, struct ibv_mr *smr, char *sbuf,
			       struct ibv_cq *scq)
{
	/* posix_spawn, not fork: a forked child lacks the registered pages (MADV_DONTFORK,
	 * as with rdma-core after ibv_fork_init), some of which hold this program's globals */
	int p[2];
	MUST(pipe(p) == 0, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	char q[16];
	snprintf(q, sizeof(q), "%u", tgt);
	char *argv[] = {"verbs_check", "xrc-peer", (char *)path, q, NULL};
	extern char **environ;
	pid_t pid;
	MUST(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ) == 0, "spawn the second process");
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	FILE *in = fdopen(p[0], "r");
	char line[512];
	unsigned srqn = 0;
	while (in && fgets(line, sizeof(line), in)) {
		printf("  %s", line);
		if (sscanf(line, "srqn %u", &srqn) == 1)
			break;
	}
	CHECK(srqn != 0, "a second process made an XRC SRQ in the shared domain: %u", srqn);
	struct ibv_sge ss = {.addr = (uintptr_t)sbuf, .length = 40, .lkey = smr->lkey};
	struct ibv_send_wr swr = {.wr_id = 8, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	swr.qp_type.xrc.remote_srqn = srqn;
	struct ibv_wc wc;
	CHECK(srqn && ibv_post_send(ini, &swr, &bad) == 0 && poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	      "SEND into the second process's SRQ: %d", wc.status);
	while (in && fgets(line, sizeof(line), in))
		printf("  %s", line);
	if (in)
		fclose(in);
	int st = 0;
	pid_t w = waitpid(pid, &st, 0);
	CHECK(w == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the second process found its receive (wait %d, status %#x)",
	      (int)w, st);
}

/* XRC on one host: a domain shared by two openings of a file, an XRC SRQ in it, an
 * initiator sending through a target into that SRQ (its completion on the SRQ's CQ),
 * and the error paths: a missing domain, O_EXCL, a foreign domain's SRQ NAKed, an
 * XRCD or SRQ in use. */
static void xrc(void)
{
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_XRC), "IBV_DEVICE_XRC advertised");
	char path[] = "/tmp/verbs_check_xrcd_XXXXXX", none[] = "/tmp/verbs_check_xrcd_XXXXXX";
	int fd = mkstemp(path), fd2 = mkstemp(none);
	MUST(fd >= 0 && fd2 >= 0, "XRCD files");
	CHECK(!open_xrcd(fd2, 0) && errno == ENOENT, "open_xrcd of a file without a domain, no O_CREAT: ENOENT (%d)",
	      errno);
	struct ibv_xrcd *x1 = open_xrcd(fd, O_CREAT), *x2 = open_xrcd(fd, 0), *private = open_xrcd(-1, O_CREAT);
	MUST(x1 && x2 && private, "open_xrcd: by file (O_CREAT), the same file again, private");
	CHECK(!open_xrcd(fd, O_CREAT | O_EXCL) && errno == EINVAL, "O_CREAT|O_EXCL of a file with a domain: EINVAL (%d)",
	      errno);
	struct ibv_xrcd_init_attr nofd = {.comp_mask = IBV_XRCD_INIT_ATTR_OFLAGS, .oflags = O_CREAT};
	errno = 0;
	CHECK(!ibv_open_xrcd(ctx, &nofd) && errno == EINVAL, "open_xrcd without the FD attribute: EINVAL");

	struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	MUST(scq && rcq, "XRC CQs");
	struct ibv_srq *srq = xrc_srq(x1, rcq), *foreign = xrc_srq(private, rcq);
	MUST(srq && foreign, "create_srq_ex of type XRC");
	uint32_t srqn = 0, fsrqn = 0;
	CHECK(ibv_get_srq_num(srq, &srqn) == 0 && ibv_get_srq_num(foreign, &fsrqn) == 0 && srqn && srqn != fsrqn,
	      "get_srq_num: %u, %u", srqn, fsrqn);
	struct ibv_srq_init_attr_ex noxrcd = {.attr = {.max_wr = 8, .max_sge = 1},
					      .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
							   IBV_SRQ_INIT_ATTR_CQ,
					      .srq_type = IBV_SRQT_XRC, .pd = pd, .cq = rcq};
	errno = 0;
	CHECK(!ibv_create_srq_ex(ctx, &noxrcd) && errno == EINVAL, "XRC SRQ without an XRCD: EINVAL");
	struct ibv_qp_init_attr_ex tgt_nox = {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd};
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &tgt_nox) && errno == EINVAL, "XRC_RECV QP without an XRCD: EINVAL");

	struct ibv_qp *tgt = xrc_recv_qp(x1);
	struct ibv_qp_init_attr_ex ia = {.send_cq = scq, .qp_type = IBV_QPT_XRC_SEND,
					 .cap = {.max_send_wr = 8, .max_send_sge = 1},
					 .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
					 .send_ops_flags = IBV_QP_EX_WITH_SEND};
	struct ibv_qp *ini = ibv_create_qp_ex(ctx, &ia);
	MUST(tgt && ini, "XRC_RECV (create_qp_ex with an XRCD) and XRC_SEND (create_qp_ex with send ops) QPs");
	struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
				      .qp_num = tgt->qp_num, .xrcd = private, .qp_type = IBV_QPT_XRC_RECV};
	errno = 0;
	CHECK(!ibv_open_qp(ctx, &oa) && errno == EINVAL, "open_qp through another domain: EINVAL (%d)", errno);
	oa.xrcd = x2;
	struct ibv_qp *opened = ibv_open_qp(ctx, &oa);
	CHECK(opened && opened->qp_num == tgt->qp_num, "open_qp through the file's second opening");

	connect_upto(tgt, ini->qp_num, &gid, IBV_QPS_RTR);
	connect_qp(ini, tgt->qp_num, &gid);
	static char sbuf[256], rbuf[256];
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	MUST(smr && rmr, "XRC MRs");
	memset(sbuf, 0x3C, sizeof(sbuf));
	struct ibv_sge rs = {.addr = (uintptr_t)rbuf, .length = sizeof(rbuf), .lkey = rmr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 77, .sg_list = &rs, .num_sge = 1}, *rbad;
	CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, "post to the XRC SRQ");
	CHECK(ibv_post_recv(ini, &rwr, &rbad) == EINVAL, "post_recv on XRC_SEND: EINVAL");
	struct ibv_sge ss = {.addr = (uintptr_t)sbuf, .length = 100, .lkey = smr->lkey};
	struct ibv_send_wr swr = {.wr_id = 5, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	swr.qp_type.xrc.remote_srqn = srqn;
	struct ibv_wc wc;
	CHECK(ibv_post_send(ini, &swr, &sbad) == 0 && poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 5,
	      "SEND through XRC: %d", wc.status);
	CHECK(poll_one(rcq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.byte_len == 100 &&
		      wc.opcode == IBV_WC_RECV && wc.qp_num == tgt->qp_num && rbuf[99] == 0x3C && rbuf[100] == 0,
	      "received on the XRC SRQ's CQ: status %d, %u bytes, QP %#x", wc.status, wc.byte_len, wc.qp_num);
	CHECK(ibv_post_send(tgt, &swr, &sbad) == EINVAL, "post_send on XRC_RECV: EINVAL");
	xrc_second_process(path, tgt->qp_num, ini, smr, sbuf, scq);
	/* the extended API: ibv_wr_set_xrc_srqn names the SRQ */
	rwr.wr_id = 78;
	CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, "post a second receive to the XRC SRQ");
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(ini);
	MUST(qx, "qp_ex of the initiator");
	ibv_wr_start(qx);
	qx->wr_id = 9;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_xrc_srqn(qx, srqn);
	ibv_wr_set_sge(qx, smr->lkey, (uintptr_t)sbuf, 50);
	CHECK(ibv_wr_complete(qx) == 0 && poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9,
	      "ibv_wr_send with ibv_wr_set_xrc_srqn: %d", wc.status);
	CHECK(poll_one(rcq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 78 && wc.byte_len == 50,
	      "its receive on the XRC SRQ's CQ: status %d, %u bytes", wc.status, wc.byte_len);
	CHECK(ibv_close_xrcd(x1) == EBUSY, "close_xrcd with an SRQ and a QP: EBUSY");
	CHECK(ibv_destroy_cq(rcq) == EBUSY, "destroy the XRC SRQ's CQ: EBUSY");

	/* a WR naming the private domain's SRQ: the target NAKs it (invalid request) */
	swr.wr_id = 6;
	swr.qp_type.xrc.remote_srqn = fsrqn;
	CHECK(ibv_post_send(ini, &swr, &sbad) == 0 && poll_one(scq, &wc) == 1 && wc.status == IBV_WC_REM_INV_REQ_ERR &&
		      wc.wr_id == 6,
	      "SEND to another domain's SRQ: REM_INV_REQ_ERR, got %d", wc.status);
	/* the target, in RTR, raised COMM_EST at the first SEND; the NAK takes both to ERR */
	struct ibv_async_event e0, e1, e2;
	CHECK(async_event(&e0) == IBV_EVENT_COMM_EST && e0.element.qp == tgt, "COMM_EST for the target in RTR");
	int t1 = async_event(&e1), t2 = async_event(&e2);
	CHECK(t1 == IBV_EVENT_QP_FATAL && t2 == IBV_EVENT_QP_FATAL &&
		      ((e1.element.qp == tgt && e2.element.qp == ini) || (e1.element.qp == ini && e2.element.qp == tgt)),
	      "QP_FATAL for the target and the initiator: %d, %d", t1, t2);
	CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_qp(tgt) == 0, "destroy the initiator and the creator's target");
	CHECK(ibv_close_xrcd(x2) == EBUSY, "close_xrcd of the opening that opened the target: EBUSY");
	CHECK(ibv_destroy_qp(opened) == 0 && ibv_close_xrcd(x2) == 0, "destroy the opened target, then close its XRCD");
	CHECK(ibv_destroy_srq(srq) == 0 && ibv_close_xrcd(x1) == 0, "destroy the SRQ, then close its XRCD");
	CHECK(!open_xrcd(fd, 0) && errno == ENOENT, "the file's domain went with its last opening");
	CHECK(ibv_destroy_srq(foreign) == 0 && ibv_close_xrcd(private) == 0, "private domain closed");
	ibv_dereg_mr(smr);
	ibv_dereg_mr(rmr);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	close(fd);
	close(fd2);
	unlink(path);
	unlink(none);
}

static void unsupported(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	/* multicast, as ib_attach_mcast and rxe check it */
	struct ibv_qp *qp = make_qp(IBV_QPT_UD, cq, NULL);
	struct ibv_qp *rc = make_qp(IBV_QPT_RC, cq, NULL);
	union ibv_gid mgid = {.raw = {0xff, 0x0e, [15] = 1}};
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0 && da.max_mcast_grp == 8192 && da.max_mcast_qp_attach == 56 &&
		      da.max_total_mcast_qp_attach == 8192 * 56,
	      "rxe's multicast limits");
	CHECK(ibv_attach_mcast(qp, &gid, 0) == EINVAL, "attach to a unicast GID: EINVAL");
	CHECK(ibv_attach_mcast(rc, &mgid, 0) == EINVAL, "attach an RC QP: EINVAL");
	CHECK(ibv_attach_mcast(qp, &mgid, 0) == 0 && ibv_attach_mcast(qp, &mgid, 0) == 0, "attach a UD QP, twice");
	CHECK(ibv_detach_mcast(qp, &mgid, 0) == 0, "detach it");
	CHECK(ibv_detach_mcast(qp, &mgid, 0) == EINVAL, "detach a non-member: EINVAL");
	ibv_destroy_qp(rc);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);

	/* a CQ of one entry overruns with three completions: CQ_ERR */
	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	char *buf = malloc(64);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
	qp = make_qp(IBV_QPT_UD, cq, NULL);
	connect_qp(qp, 0, &gid);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	for (int i = 0; i < 3; i++)
		CHECK(ibv_post_send(qp, &wr, &bad) == 0, "send %d to itself", i);
	struct ibv_async_event ev;
	CHECK(cq->cqe == 1 && async_event(&ev) == IBV_EVENT_CQ_ERR && ev.element.cq == cq, "CQ_ERR for the overrun CQ: event %d",
	      ev.event_type);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
	/* no asynchronous event is pending: a non-blocking fd says so */
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, "no async event");
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "xrc-peer") == 0)
		return xrc_peer(argv[2], (uint32_t)strtoul(argv[3], NULL, 0));
	if (argc < 2 || (strcmp(argv[1], "server") && (strcmp(argv[1], "client") || argc < 3))) {
		fprintf(stderr, "usage: verbs_check server | verbs_check client SERVER_IP\n");
		return 2;
	}
	is_client = strcmp(argv[1], "client") == 0;
	device_and_queries();
	meet(is_client ? argv[2] : NULL);
	pd = ibv_alloc_pd(ctx);
	MUST(pd, "PD");
	rc_tests();
	wr_api_and_inline();
	ud_and_srq();
	rxe_parity();
	resize_and_rereg();
	memory_windows();
	xrc();
	unsupported();
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc PD");
	CHECK(ibv_close_device(ctx) == 0, "close");
	printf("verbs_check %s: %d checks, %d failed\n", argv[1], checks, failures);
	return failures != 0;
}
