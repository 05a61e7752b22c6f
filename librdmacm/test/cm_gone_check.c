/*
 * cm_gone_check: what an RDMA-CM application sees when its RNIC goes away (the lab
 * process dies, docs/rdmacm.md). It listens on an identifier of an event channel,
 * prints "ready" and blocks in rdma_get_cm_event; the test then kills the lab process.
 * Expected, as the kernel's rdma_cm tells the identifiers of a removed device: the
 * blocked rdma_get_cm_event returns RDMA_CM_EVENT_DEVICE_REMOVAL for the listener, the
 * next call fails with ENODEV instead of blocking, and a call on the identifier fails.
 * Exit status 0 when all of that holds; every finding is printed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../libibverbs/test/check.h"

int main(void)
{
	alarm(60); /* a hang is a failure too */
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *addr = getenv("ROCELAB_IPV4");
	if (!addr) {
		printf("FAIL: ROCELAB_IPV4 is not set (run through rocelab exec)\n");
		return 1;
	}
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("FAIL: channel or identifier: %s\n", strerror(errno));
		return 1;
	}
	struct sockaddr_in sin = {.sin_family = AF_INET};
	inet_pton(AF_INET, addr, &sin.sin_addr);
	if (rdma_bind_addr(id, (struct sockaddr *)&sin) || rdma_listen(id, 4)) {
		printf("FAIL: bind or listen: %s\n", strerror(errno));
		return 1;
	}
	printf("ready\n");
	struct rdma_cm_event *e;
	int rc = rdma_get_cm_event(ch, &e);
	CHECK(rc == 0, "rdma_get_cm_event after the RNIC went: %s", strerror(errno));
	if (rc == 0) {
		printf("event %s\n", rdma_event_str(e->event));
		CHECK(e->event == RDMA_CM_EVENT_DEVICE_REMOVAL, "event %s, want RDMA_CM_EVENT_DEVICE_REMOVAL",
		      rdma_event_str(e->event));
		CHECK(e->id == id, "the removal names another identifier");
		rdma_ack_cm_event(e);
	}
	rc = rdma_get_cm_event(ch, &e);
	CHECK(rc == -1 && errno == ENODEV, "a second rdma_get_cm_event: %d, errno %d, want -1 and ENODEV", rc, errno);
	rc = rdma_listen(id, 4);
	CHECK(rc == -1, "rdma_listen on a removed device succeeded");
	if (failures)
		return 1;
	printf("ok\n");
	return 0;
}
