/*
 * cm_check: rocelab's librdmacm.so.1 beyond what rping and perftest use, compiled
 * against librdmacm-dev as any program is and run by TestLibrdmacm between two lab
 * hosts:
 *
 *   cm_check server ADDR PORT    (first)
 *   cm_check client ADDR PORT    (ADDR, PORT: the server's)
 *
 * The server rejects the first connection request with private data and accepts the
 * next three; the client checks the rejection, the connections, a SEND across each,
 * and the disconnects, besides the library's error paths. The second connection's QPs
 * are rdma_create_qp's, which the library moves; in the third the server moves its own
 * QP with rdma_init_qp_attr and accepts with private data, which the client's
 * ESTABLISHED brings, with the ToS and ACK timeout the client set with
 * rdma_set_option; in the fourth the client moves its own QP after CONNECT_RESPONSE
 * and calls rdma_establish. The fifth is UD through SIDR (udaddy's kind) with a UDP
 * listener on PORT+1, after a SIDR request for PORT, where only the TCP listener is.
 * Each check prints "ok" or "FAIL" and a name; the exit status is the number of
 * failures.
 */
#define _GNU_SOURCE /* gettid */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../libibverbs/test/check.h"

/* next waits for the channel's next event (blocking) and returns its type, or -1 (and
 * *ev NULL). */
static int next(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
	if (rdma_get_cm_event(ch, ev)) {
		perror("rdma_get_cm_event");
		*ev = NULL;
		return -1;
	}
	return (*ev)->event;
}

/* ack acknowledges *ev if a check got that far. */
static void ack(struct rdma_cm_event **ev)
{
	if (*ev)
		rdma_ack_cm_event(*ev);
	*ev = NULL;
}

static struct sockaddr_storage address(const char *host, const char *port, int passive)
{
	struct rdma_addrinfo hints = {.ai_flags = passive ? RAI_PASSIVE : 0, .ai_port_space = RDMA_PS_TCP}, *res;
	struct sockaddr_storage ss = {0};
	int ret = rdma_getaddrinfo(host, port, &hints, &res);
	CHECK(ret == 0, "rdma_getaddrinfo(%s, %s): %s", host, port, ret ? gai_strerror(ret) : "");
	if (ret)
		exit(1);
	struct sockaddr *sa = passive ? res->ai_src_addr : res->ai_dst_addr;
	CHECK(sa && (passive ? !res->ai_dst_addr : !res->ai_src_addr) && res->ai_qp_type == IBV_QPT_RC &&
		      res->ai_port_space == RDMA_PS_TCP,
	      "rdma_getaddrinfo gives the %s address, RC, RDMA_PS_TCP", passive ? "source" : "destination");
	memcpy(&ss, sa, passive ? res->ai_src_len : res->ai_dst_len);
	rdma_freeaddrinfo(res);
	return ss;
}

/* qp makes an RC QP on id's device with rdma_create_qp and its own PD and CQ, and
 * registers buf. */
static struct ibv_cq *qp(struct rdma_cm_id *id, struct ibv_mr **mr, char *buf, size_t len)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	CHECK(cq && rdma_create_qp(id, pd, &a) == 0, "rdma_create_qp");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(id->qp && ibv_query_qp(id->qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_INIT,
	      "rdma_create_qp leaves the QP in INIT");
	*mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	return cq;
}

/* ud_qp makes a UD QP on id's device with rdma_create_qp and its own PD and CQ, and
 * registers buf. */
static struct ibv_cq *ud_qp(struct rdma_cm_id *id, struct ibv_mr **mr, char *buf, size_t len)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	CHECK(cq && rdma_create_qp(id, pd, &a) == 0, "rdma_create_qp (UD)");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(id->qp && ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY, &qi) == 0 && qa.qp_state == IBV_QPS_RTS &&
		      qa.qkey == RDMA_UDP_QKEY,
	      "rdma_create_qp brings a UD QP to RTS with rdma_cm's Q_Key");
	*mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	return cq;
}

/* own_qp makes an RC QP on id's device with ibv_create_qp (not rdma_create_qp: the
 * application moves it itself), with a PD and CQ of its own, registering buf. */
static struct ibv_qp *own_qp(struct rdma_cm_id *id, struct ibv_cq **cq, struct ibv_mr **mr, char *buf, size_t len)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	*cq = pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr a = {.send_cq = *cq, .recv_cq = *cq, .qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *q = *cq ? ibv_create_qp(pd, &a) : NULL;
	*mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(q && *mr && id->qp == NULL, "ibv_create_qp (the application's own QP)");
	return q;
}

/* move brings q to state with rdma_init_qp_attr's attributes, returning them in *a. */
static int move(struct rdma_cm_id *id, struct ibv_qp *q, enum ibv_qp_state state, struct ibv_qp_attr *a)
{
	int mask = 0;
	memset(a, 0, sizeof(*a));
	a->qp_state = state;
	return rdma_init_qp_attr(id, a, &mask) == 0 && (mask & IBV_QP_STATE) && ibv_modify_qp(q, a, mask) == 0;
}

static int complete(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		;
	if (n == 1 && wc->status != IBV_WC_SUCCESS)
		printf("     completion: %s\n", ibv_wc_status_str(wc->status));
	return n == 1 && wc->status == IBV_WC_SUCCESS;
}

/* waiter is a thread waiting in rdma_get_cm_event, as rping's event thread does. */
struct waiter {
	struct rdma_event_channel *ch;
	pid_t tid;
	int returned;
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;
	struct rdma_cm_event *ev;
	__atomic_store_n(&w->tid, gettid(), __ATOMIC_SEQ_CST);
	rdma_get_cm_event(w->ch, &ev);
	__atomic_store_n(&w->returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* reading waits (up to 10 s) until thread tid is blocked in read(2) with eventfd fd
 * drained: the thread has taken every token and waits for the next. */
static int reading(pid_t tid, int fd)
{
	char path[64], line[256];
	for (int i = 0; i < 10000; i++, usleep(1000)) {
		int in_read = 0, drained = 0;
		snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
		FILE *f = fopen(path, "r");
		if (f) {
			in_read = fgets(line, sizeof(line), f) && strncmp(line, "0 ", 2) == 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		if ((f = fopen(path, "r"))) {
			unsigned long long count;
			while (fgets(line, sizeof(line), f))
				drained = drained || (sscanf(line, "eventfd-count: %llx", &count) == 1 && count == 0);
			fclose(f);
		}
		if (in_read && drained)
			return 1;
	}
	return 0;
}

/* destroyed_under_waiter: rping's main thread destroys its identifier and channel while
 * its event thread still waits in rdma_get_cm_event, then returns. With the kernel's
 * rdma_cm that thread waits on until the process exits (the closed file stays open
 * under its read); it must not fail (EBADF made rping exit 255 after its last ping),
 * not even when woken by a token whose event went with the identifier. rocelab's
 * library wakes its waiters with eventfd tokens that the verbs service writes; the
 * check writes one as the service would for an event queued before the destroy. */
static void destroyed_under_waiter(void)
{
	struct waiter w = {.ch = rdma_create_event_channel()};
	pthread_t th;
	if (!w.ch || pthread_create(&th, NULL, wait_event, &w) != 0) {
		CHECK(0, "a channel and a thread waiting on it");
		return;
	}
	while (!__atomic_load_n(&w.tid, __ATOMIC_SEQ_CST))
		sched_yield();
	int fd = w.ch->fd;
	CHECK(reading(w.tid, fd), "a thread waits in rdma_get_cm_event");
	rdma_destroy_event_channel(w.ch);
	static const uint64_t stale = 1;
	CHECK(write(fd, &stale, sizeof(stale)) == sizeof(stale) && reading(w.tid, fd) &&
		      !__atomic_load_n(&w.returned, __ATOMIC_SEQ_CST),
	      "the channel destroyed under it, and a stale token, it waits on, as with the kernel's rdma_cm");
	pthread_detach(th); /* it waits until the process exits */
}

static void common(void)
{
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED") == 0 &&
		      strcmp(rdma_event_str(99), "UNKNOWN EVENT") == 0,
	      "rdma_event_str");
	int n = -1;
	struct ibv_context **devs = rdma_get_devices(&n);
	CHECK(devs && n == 1 && devs[0] && !devs[1] && strcmp(ibv_get_device_name(devs[0]->device), "rocelab0") == 0,
	      "rdma_get_devices: rocelab0 only");
	rdma_free_devices(devs);

	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	errno = 0;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_IPOIB) == -1 && errno == EOPNOTSUPP,
	      "rdma_create_id(RDMA_PS_IPOIB) fails with EOPNOTSUPP");
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0 && id->verbs && id->channel == ch, "rdma_create_id");
	uint8_t tos = 0;
	int on = 1;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0 &&
		      rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tos, 1) == 0 &&
		      rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on)) == 0 &&
		      rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof(on)) == 0,
	      "rdma_set_option: TOS, ACK_TIMEOUT, REUSEADDR, AFONLY");
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &on, sizeof(on)) == -1 && errno == EINVAL,
	      "rdma_set_option(TOS) with an int: EINVAL");
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, 99, &on, sizeof(on)) == -1 && errno == ENOSYS,
	      "rdma_set_option of an unknown option: ENOSYS");
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_RTR};
	int mask;
	errno = 0;
	CHECK(rdma_init_qp_attr(id, &qa, &mask) == -1 && errno == EINVAL, "rdma_init_qp_attr(RTR) unconnected: EINVAL");
	qa.qp_state = IBV_QPS_INIT;
	CHECK(rdma_init_qp_attr(id, &qa, &mask) == 0 && qa.port_num == 1 && qa.pkey_index == 0 &&
		      mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) &&
		      qa.qp_access_flags == (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC),
	      "rdma_init_qp_attr(INIT): port 1, P_Key index 0, remote access");
	errno = 0;
	CHECK(rdma_establish(id) == -1 && errno == EINVAL, "rdma_establish unconnected: EINVAL");
	struct rdma_cm_id *ud;
	CHECK(rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP) == 0 && ud->qp_type == IBV_QPT_UD, "rdma_create_id(RDMA_PS_UDP)");
	qa.qp_state = IBV_QPS_INIT;
	CHECK(rdma_init_qp_attr(ud, &qa, &mask) == 0 && qa.qkey == RDMA_UDP_QKEY && (mask & IBV_QP_QKEY),
	      "rdma_init_qp_attr(INIT) of a UD identifier: rdma_cm's Q_Key");
	errno = 0;
	CHECK(rdma_set_option(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tos, 1) == -1 && errno == EINVAL,
	      "rdma_set_option(ACK_TIMEOUT) of a UD identifier: EINVAL");
	rdma_destroy_id(ud);
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "the channel's fd goes non-blocking");
	struct rdma_cm_event *ev = NULL;
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "no event: rdma_get_cm_event says EAGAIN");
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
	rdma_destroy_event_channel(ch);
	destroyed_under_waiter();
}

static int server(const char *host, const char *port)
{
	struct sockaddr_storage ss = address(NULL, port, 1);
	(void)host;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *id;
	int ctx;
	CHECK(rdma_create_id(ch, &listener, &ctx, RDMA_PS_TCP) == 0, "rdma_create_id (listener)");
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&ss) == 0 && rdma_listen(listener, 4) == 0,
	      "rdma_bind_addr on the wildcard address, rdma_listen");
	int on = 1;
	errno = 0;
	CHECK(rdma_set_option(listener, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof(on)) == -1 && errno == EINVAL,
	      "rdma_set_option(AFONLY) on a listener: EINVAL");
	struct rdma_cm_id *udp;
	struct sockaddr_storage us = ss; /* sin_port and sin6_port are at the same place */
	((struct sockaddr_in *)&us)->sin_port = htons(ntohs(((struct sockaddr_in *)&ss)->sin_port) + 1);
	CHECK(rdma_create_id(ch, &udp, NULL, RDMA_PS_UDP) == 0 && rdma_bind_addr(udp, (struct sockaddr *)&us) == 0 &&
		      rdma_listen(udp, 1) == 0,
	      "a UDP listener on the next port");
	printf("listening\n");
	fflush(stdout);

	struct rdma_cm_event *ev = NULL;
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_CONNECT_REQUEST, "first connection request");
	id = ev->id;
	CHECK(ev->listen_id == listener && id->context == &ctx && id != listener, "the request's new id and its listener");
	CHECK(ev->param.conn.private_data_len >= 6 && memcmp(ev->param.conn.private_data, "first", 6) == 0,
	      "the request's private data");
	CHECK(rdma_reject(id, "nope", 5) == 0, "rdma_reject with private data");
	ack(&ev);
	rdma_destroy_id(id);

	CHECK(next(ch, &ev) == RDMA_CM_EVENT_CONNECT_REQUEST, "second connection request");
	id = ev->id;
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(id);
	CHECK(peer->sin_family == AF_INET && rdma_get_dst_port(id) == peer->sin_port && peer->sin_port != 0,
	      "the request's peer address and port");
	ack(&ev);
	static char buf[64];
	struct ibv_mr *mr;
	struct ibv_cq *cq = qp(id, &mr, buf, sizeof(buf));
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr->lkey};
	struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1}, *bad;
	CHECK(ibv_post_recv(id->qp, &rwr, &bad) == 0, "post a receive");
	CHECK(rdma_accept(id, NULL) == 0, "rdma_accept");
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_ESTABLISHED && ev->id == id, "ESTABLISHED");
	ack(&ev);
	struct ibv_wc wc;
	CHECK(complete(cq, &wc) && wc.opcode == IBV_WC_RECV && strcmp(buf, "over rdma_cm") == 0, "the client's SEND");
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_DISCONNECTED && ev->id == id, "DISCONNECTED (the client's DREQ)");
	ack(&ev);
	CHECK(rdma_disconnect(id) == 0, "rdma_disconnect answers with the DREP");
	rdma_destroy_qp(id);
	CHECK(id->qp == NULL, "rdma_destroy_qp");
	rdma_destroy_id(id);

	/* Third: the server moves its own QP and accepts with private data. */
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_CONNECT_REQUEST, "third connection request");
	id = ev->id;
	uint32_t peer_qpn = ev->param.conn.qp_num;
	ack(&ev);
	static char buf3[64];
	struct ibv_qp *q = own_qp(id, &cq, &mr, buf3, sizeof(buf3));
	struct ibv_qp_attr a;
	CHECK(move(id, q, IBV_QPS_INIT, &a), "rdma_init_qp_attr(INIT), ibv_modify_qp");
	sge = (struct ibv_sge){.addr = (uintptr_t)buf3, .length = sizeof(buf3), .lkey = mr->lkey};
	CHECK(ibv_post_recv(q, &rwr, &bad) == 0, "post a receive");
	CHECK(move(id, q, IBV_QPS_RTR, &a) && peer_qpn != 0 && a.dest_qp_num == peer_qpn && a.ah_attr.grh.traffic_class == 0x28 &&
		      a.path_mtu == IBV_MTU_1024 && a.min_rnr_timer == 12,
	      "rdma_init_qp_attr(RTR): the request's QPN and ToS, path MTU 1024; ibv_modify_qp");
	CHECK(move(id, q, IBV_QPS_RTS, &a) && a.timeout == 19 && a.retry_cnt == 7, "rdma_init_qp_attr(RTS): ACK timeout 19, retry count 7; ibv_modify_qp");
	struct rdma_conn_param p = {.qp_num = q->qp_num, .private_data = "welcome", .private_data_len = 8,
				    .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
	CHECK(rdma_accept(id, &p) == 0, "rdma_accept of the application's QP, with private data");
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_ESTABLISHED && ev->id == id, "ESTABLISHED");
	ack(&ev);
	CHECK(complete(cq, &wc) && wc.opcode == IBV_WC_RECV && strcmp(buf3, "third") == 0, "the client's SEND to the application's QP");
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_DISCONNECTED && ev->id == id, "DISCONNECTED");
	ack(&ev);
	CHECK(rdma_disconnect(id) == 0 && ibv_destroy_qp(q) == 0, "rdma_disconnect, ibv_destroy_qp");
	rdma_destroy_id(id);

	/* Fourth: the client moves its own QP and calls rdma_establish. */
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_CONNECT_REQUEST, "fourth connection request");
	id = ev->id;
	ack(&ev);
	static char buf4[64];
	cq = qp(id, &mr, buf4, sizeof(buf4));
	sge = (struct ibv_sge){.addr = (uintptr_t)buf4, .length = sizeof(buf4), .lkey = mr->lkey};
	CHECK(ibv_post_recv(id->qp, &rwr, &bad) == 0, "post a receive");
	CHECK(rdma_accept(id, NULL) == 0, "rdma_accept");
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_ESTABLISHED && ev->id == id, "ESTABLISHED (the client's rdma_establish)");
	ack(&ev);
	CHECK(complete(cq, &wc) && wc.opcode == IBV_WC_RECV && strcmp(buf4, "fourth") == 0, "the SEND of the client's own QP");
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_DISCONNECTED && ev->id == id, "DISCONNECTED");
	ack(&ev);
	CHECK(rdma_disconnect(id) == 0, "rdma_disconnect");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* Fifth: UD through SIDR, accepted without parameters */
	CHECK(next(ch, &ev) == RDMA_CM_EVENT_CONNECT_REQUEST && ev->listen_id == udp && ev->param.ud.private_data_len == 180 &&
		      memcmp(ev->param.ud.private_data, "fifth", 6) == 0,
	      "a SIDR request on the UDP listener, its private data (180 bytes)");
	id = ev ? ev->id : NULL;
	ack(&ev);
	static char ubuf[40 + 64];
	cq = ud_qp(id, &mr, ubuf, sizeof(ubuf));
	sge = (struct ibv_sge){.addr = (uintptr_t)ubuf, .length = sizeof(ubuf), .lkey = mr->lkey};
	CHECK(ibv_post_recv(id->qp, &rwr, &bad) == 0, "post a receive");
	CHECK(rdma_accept(id, NULL) == 0, "rdma_accept(id, NULL) answers with a SIDR_REP");
	CHECK(complete(cq, &wc) && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_GRH) && strcmp(ubuf + 40, "fifth") == 0,
	      "the client's UD SEND, behind its GRH");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(udp);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ch);
	return failures;
}

/* connect_qp runs the active side up to the connection's outcome, which it returns:
 * of id->qp, or of the application's own QP qpn. */
static int connect_qp(struct rdma_event_channel *ch, struct rdma_cm_id *id, struct sockaddr_storage *dst,
		      const char *private_data, uint32_t qpn, struct rdma_cm_event **ev)
{
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000) || next(ch, ev) != RDMA_CM_EVENT_ADDR_RESOLVED)
		return -1;
	ack(ev);
	if (rdma_resolve_route(id, 2000) || next(ch, ev) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		return -1;
	ack(ev);
	struct rdma_conn_param p = {.private_data = private_data, .private_data_len = strlen(private_data) + 1,
				    .retry_count = 7, .rnr_retry_count = 7, .qp_num = qpn,
				    .responder_resources = 1, .initiator_depth = 1};
	if (rdma_connect(id, &p))
		return -1;
	return next(ch, ev);
}

/* connect_to runs the active side up to the connection's outcome, which it returns. */
static int connect_to(struct rdma_event_channel *ch, struct rdma_cm_id *id, struct sockaddr_storage *dst,
		      const char *private_data, struct rdma_cm_event **ev)
{
	return connect_qp(ch, id, dst, private_data, 0, ev);
}

static int client(const char *host, const char *port)
{
	struct sockaddr_storage dst = address(host, port, 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev = NULL;
	static char buf[64];
	struct ibv_mr *mr;
	struct ibv_cq *cq;

	/* A port nobody listens on: the REJ "invalid service ID". */
	struct sockaddr_storage none = dst;
	((struct sockaddr_in *)&none)->sin_port = htons(1);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	cq = qp(id, &mr, buf, sizeof(buf));
	CHECK(connect_to(ch, id, &none, "x", &ev) == RDMA_CM_EVENT_REJECTED && ev->status == 8,
	      "no listener: REJECTED, status 8");
	ack(&ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* An address nobody has: ADDR_ERROR after the timeout. */
	struct sockaddr_storage nobody = dst;
	((struct sockaddr_in *)&nobody)->sin_addr.s_addr = htonl(ntohl(((struct sockaddr_in *)&dst)->sin_addr.s_addr) + 77);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&nobody, 200) == 0 &&
		      next(ch, &ev) == RDMA_CM_EVENT_ADDR_ERROR && ev->status == -ETIMEDOUT,
	      "an address without a neighbour: ADDR_ERROR, -ETIMEDOUT");
	ack(&ev);
	rdma_destroy_id(id);

	/* The server's first answer is a rejection; until it listens, REJ 8 (try again). */
	int type, tries = 0;
	do {
		rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
		cq = qp(id, &mr, buf, sizeof(buf));
		type = connect_to(ch, id, &dst, "first", &ev);
		if (type == RDMA_CM_EVENT_REJECTED && ev->status == 8) {
			ack(&ev);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			continue;
		}
		break;
	} while (++tries < 200);
	CHECK(type == RDMA_CM_EVENT_REJECTED && ev->status == 28 && ev->param.conn.private_data_len >= 5 &&
		      memcmp(ev->param.conn.private_data, "nope", 5) == 0,
	      "the server's rejection: REJECTED, status 28 (consumer defined), its private data");
	ack(&ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	cq = qp(id, &mr, buf, sizeof(buf));
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&pfd, 1, 0) == 0, "the channel's fd is not readable without an event");
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0 && poll(&pfd, 1, 5000) == 1 &&
		      next(ch, &ev) == RDMA_CM_EVENT_ADDR_RESOLVED,
	      "poll sees the channel's fd readable for ADDR_RESOLVED");
	ack(&ev);
	struct sockaddr_in *src = (struct sockaddr_in *)rdma_get_local_addr(id);
	CHECK(src->sin_family == AF_INET && src->sin_addr.s_addr != 0 && rdma_get_src_port(id) != 0,
	      "the resolved source address and port");
	CHECK(rdma_resolve_route(id, 2000) == 0 && next(ch, &ev) == RDMA_CM_EVENT_ROUTE_RESOLVED, "ROUTE_RESOLVED");
	ack(&ev);
	CHECK(rdma_connect(id, NULL) == 0 && next(ch, &ev) == RDMA_CM_EVENT_ESTABLISHED && ev->id == id,
	      "rdma_connect: ESTABLISHED");
	ack(&ev);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(id->qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS, "the QP is in RTS");
	strcpy(buf, "over rdma_cm");
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	CHECK(ibv_post_send(id->qp, &wr, &bad) == 0 && complete(cq, &wc), "a SEND to the server");
	errno = 0;
	CHECK(rdma_establish(id) == -1 && errno == EINVAL, "rdma_establish with rdma_create_qp's QP: EINVAL");
	CHECK(rdma_disconnect(id) == 0 && next(ch, &ev) == RDMA_CM_EVENT_DISCONNECTED, "rdma_disconnect: DISCONNECTED");
	ack(&ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* Third: ToS and ACK timeout set; the server accepts with private data. */
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	cq = qp(id, &mr, buf, sizeof(buf));
	uint8_t tos = 0x28, timeout = 14;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0 &&
		      rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1) == 0,
	      "rdma_set_option: ToS 0x28, ACK timeout 14");
	CHECK(connect_to(ch, id, &dst, "third", &ev) == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data_len == 196 &&
		      memcmp(ev->param.conn.private_data, "welcome", 8) == 0 && ev->param.conn.qp_num != 0,
	      "ESTABLISHED brings the server's accept private data (196 bytes, as the kernel's REP) and QPN");
	uint32_t server_qpn = ev ? ev->param.conn.qp_num : 0;
	ack(&ev);
	CHECK(ibv_query_qp(id->qp, &qa, IBV_QP_TIMEOUT | IBV_QP_AV | IBV_QP_DEST_QPN, &qi) == 0 && qa.timeout == 14 &&
		      qa.ah_attr.grh.traffic_class == 0x28 && qa.dest_qp_num == server_qpn,
	      "the QP has ACK timeout 14, traffic class 0x28 and the server's QP");
	strcpy(buf, "third");
	sge.lkey = mr->lkey;
	CHECK(ibv_post_send(id->qp, &wr, &bad) == 0 && complete(cq, &wc), "a SEND to the server's own QP");
	CHECK(rdma_disconnect(id) == 0 && next(ch, &ev) == RDMA_CM_EVENT_DISCONNECTED, "rdma_disconnect: DISCONNECTED");
	ack(&ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* Fourth: the client's own QP, moved after CONNECT_RESPONSE; rdma_establish. */
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	static char buf4[64];
	struct ibv_qp *q = own_qp(id, &cq, &mr, buf4, sizeof(buf4));
	struct ibv_qp_attr a;
	CHECK(move(id, q, IBV_QPS_INIT, &a), "rdma_init_qp_attr(INIT), ibv_modify_qp");
	errno = 0;
	CHECK(rdma_connect(id, NULL) == -1 && errno == EINVAL, "rdma_connect without a QP or parameters: EINVAL");
	CHECK(connect_qp(ch, id, &dst, "fourth", q->qp_num, &ev) == RDMA_CM_EVENT_CONNECT_RESPONSE && ev->param.conn.qp_num != 0,
	      "rdma_connect of the application's QP: CONNECT_RESPONSE");
	uint32_t peer = ev ? ev->param.conn.qp_num : 0;
	ack(&ev);
	CHECK(move(id, q, IBV_QPS_RTR, &a) && a.dest_qp_num == peer && (a.rq_psn & ~0xffffffu) == 0, "rdma_init_qp_attr(RTR): the REP's QPN; ibv_modify_qp");
	CHECK(move(id, q, IBV_QPS_RTS, &a) && a.timeout == 19, "rdma_init_qp_attr(RTS), ibv_modify_qp");
	CHECK(rdma_establish(id) == 0, "rdma_establish");
	strcpy(buf4, "fourth");
	sge = (struct ibv_sge){.addr = (uintptr_t)buf4, .length = sizeof(buf4), .lkey = mr->lkey};
	CHECK(ibv_post_send(q, &wr, &bad) == 0 && complete(cq, &wc), "a SEND from the application's QP after rdma_establish");
	CHECK(rdma_disconnect(id) == 0 && next(ch, &ev) == RDMA_CM_EVENT_DISCONNECTED, "rdma_disconnect: DISCONNECTED");
	ack(&ev);
	ibv_destroy_qp(q);
	rdma_destroy_id(id);

	/* Fifth: UD through SIDR; first to PORT, where only a TCP listener is */
	rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
	static char ubuf[64];
	cq = ud_qp(id, &mr, ubuf, sizeof(ubuf));
	CHECK(connect_to(ch, id, &dst, "x", &ev) == RDMA_CM_EVENT_UNREACHABLE && ev->status == 5,
	      "a SIDR request to a port with a TCP listener only: UNREACHABLE, status 5 (unsupported)");
	ack(&ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	struct sockaddr_storage udst = dst;
	((struct sockaddr_in *)&udst)->sin_port = htons(ntohs(((struct sockaddr_in *)&dst)->sin_port) + 1);
	rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
	cq = ud_qp(id, &mr, ubuf, sizeof(ubuf));
	union ibv_gid server = {.raw = {[10] = 0xff, [11] = 0xff}};
	memcpy(&server.raw[12], &((struct sockaddr_in *)&dst)->sin_addr, 4);
	CHECK(connect_to(ch, id, &udst, "fifth", &ev) == RDMA_CM_EVENT_ESTABLISHED && ev->param.ud.qp_num != 0 &&
		      ev->param.ud.qkey == RDMA_UDP_QKEY && ev->param.ud.ah_attr.is_global &&
		      memcmp(ev->param.ud.ah_attr.grh.dgid.raw, server.raw, 16) == 0 && ev->param.ud.ah_attr.grh.flow_label != 0,
	      "ESTABLISHED: the server's UD QP, rdma_cm's Q_Key, an address handle to the server");
	struct ibv_ah *ah = ev ? ibv_create_ah(id->pd, &ev->param.ud.ah_attr) : NULL;
	uint32_t uqpn = ev ? ev->param.ud.qp_num : 0, uqkey = ev ? ev->param.ud.qkey : 0;
	ack(&ev);
	CHECK(ah != NULL, "ibv_create_ah from ESTABLISHED's ah_attr");
	strcpy(ubuf, "fifth");
	sge = (struct ibv_sge){.addr = (uintptr_t)ubuf, .length = sizeof(ubuf), .lkey = mr->lkey};
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = uqpn;
	wr.wr.ud.remote_qkey = uqkey;
	CHECK(ah && ibv_post_send(id->qp, &wr, &bad) == 0 && complete(cq, &wc), "a UD SEND to the server");
	if (ah)
		ibv_destroy_ah(ah);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return failures;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: cm_check server|client ADDR PORT\n");
		return 2;
	}
	common();
	return strcmp(argv[1], "server") == 0 ? server(argv[2], argv[3]) : client(argv[2], argv[3]);
}
