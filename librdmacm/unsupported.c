/*
 * The rest of librdmacm's ABI (librdmacm.map), so that every program linked against
 * rdma-core's librdmacm loads: each call prints one line naming it on stderr at its
 * first use and fails with ENOSYS: they need what the CM agent does not do yet
 * (docs/rdmacm.md). rsockets are rsocket.c.
 */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>

#define TELL(name)                                                                                                     \
	do {                                                                                                           \
		static int told;                                                                                       \
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))                                                  \
			fprintf(stderr, "rocelab librdmacm: %s is not supported\n", name);                             \
	} while (0)

#define UNSUPPORTED(type, name, ...)                                                                                   \
	type name(__VA_ARGS__)                                                                                         \
	{                                                                                                              \
		TELL(#name);                                                                                           \
		errno = ENOSYS;                                                                                        \
		return -1;                                                                                             \
	}
#define UNSUPPORTED_VOID(name, ...)                                                                                    \
	void name(__VA_ARGS__)                                                                                         \
	{                                                                                                              \
		TELL(#name);                                                                                           \
		errno = ENOSYS;                                                                                        \
	}

/* RDMA-CM */
UNSUPPORTED(int, rdma_notify, struct rdma_cm_id *id, enum ibv_event_type event)
UNSUPPORTED(int, rdma_reject_ece, struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
