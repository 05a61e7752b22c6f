/*
 * fatal_check: what an application sees when its RNIC goes away (the lab process dies,
 * docs/libibverbs.md). It opens the device, posts three receives on an RC QP in INIT,
 * arms its CQ, prints "ready" and blocks in ibv_get_cq_event while a thread blocks in
 * ibv_get_async_event; the test then kills the lab process. Expected, as from a kernel
 * device that hit a fatal error: ibv_get_cq_event fails with EIO, ibv_poll_cq returns
 * the three receives with IBV_WC_FATAL_ERR, ibv_get_async_event gives
 * IBV_EVENT_DEVICE_FATAL, a control call fails with EIO and the destroys succeed.
 * Exit status 0 when all of that holds; every finding is printed.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static void *async_waiter(void *arg)
{
	struct ibv_context *ctx = arg;
	struct ibv_async_event e;
	int rc = ibv_get_async_event(ctx, &e);
	if (rc == 0) {
		printf("async event %s\n", ibv_event_type_str(e.event_type));
		CHECK(e.event_type == IBV_EVENT_DEVICE_FATAL, "async event %d, want IBV_EVENT_DEVICE_FATAL", e.event_type);
		ibv_ack_async_event(&e);
	} else {
		CHECK(0, "ibv_get_async_event: %s", strerror(errno));
	}
	return NULL;
}

int main(void)
{
	alarm(60); /* a hang is a failure too */
	setvbuf(stdout, NULL, _IOLBF, 0);
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("FAIL: no device\n");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx) {
		printf("FAIL: open: %s\n", strerror(errno));
		return 1;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;
	struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = mr && cq ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp) {
		printf("FAIL: set-up: %s\n", strerror(errno));
		return 1;
	}
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		printf("FAIL: INIT: %s\n", strerror(errno));
		return 1;
	}
	for (uint64_t id = 101; id <= 103; id++) {
		struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
		if (ibv_post_recv(qp, &wr, &bad)) {
			printf("FAIL: post_recv: %s\n", strerror(errno));
			return 1;
		}
	}
	if (ibv_req_notify_cq(cq, 0)) {
		printf("FAIL: req_notify_cq\n");
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, async_waiter, ctx);
	printf("ready\n");

	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int rc = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
	printf("get_cq_event: %d (%s)\n", rc, rc ? strerror(errno) : "an event");
	CHECK(rc == -1 && errno == EIO, "ibv_get_cq_event after the RNIC went: %d, errno %d, want -1 and EIO", rc, errno);
	pthread_join(t, NULL);

	struct ibv_wc wc[8];
	int got = ibv_poll_cq(cq, 8, wc);
	printf("poll_cq: %d completions\n", got);
	CHECK(got == 3, "poll_cq gave %d completions, want the 3 outstanding receives", got);
	for (int i = 0; i < got; i++) {
		printf("  wr_id %llu status %s\n", (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
		CHECK(wc[i].status == IBV_WC_FATAL_ERR && wc[i].wr_id == 101 + (uint64_t)i && wc[i].qp_num == qp->qp_num,
		      "completion %d: wr_id %llu status %d", i, (unsigned long long)wc[i].wr_id, wc[i].status);
	}
	CHECK(ibv_poll_cq(cq, 8, wc) == 0, "a second poll_cq gave more completions");

	struct ibv_async_event e;
	rc = ibv_get_async_event(ctx, &e);
	CHECK(rc == -1 && errno == EIO, "a second ibv_get_async_event: %d, errno %d, want -1 and EIO", rc, errno);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	printf("alloc_pd: %s\n", pd2 ? "a PD" : strerror(errno));
	CHECK(!pd2 && errno == EIO, "ibv_alloc_pd after the RNIC went: errno %d, want EIO", errno);

	CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	ibv_ack_cq_events(cq, 0);
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close_device");
	ibv_free_device_list(list);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
