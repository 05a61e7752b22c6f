/*
 * The rest of librdmacm's ABI (librdmacm.map), so that every program linked against
 * rdma-core's librdmacm loads: each call prints one line naming it on stderr at its
 * first use and fails with ENOSYS. rsockets would need a byte stream over RC QPs of
 * their own; the others need what the CM agent does not do yet (docs/rdmacm.md).
 */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <sys/select.h>

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

/* rsockets */
UNSUPPORTED(int, rsocket, int domain, int type, int protocol)
UNSUPPORTED(int, rbind, int socket, const struct sockaddr *addr, socklen_t addrlen)
UNSUPPORTED(int, rlisten, int socket, int backlog)
UNSUPPORTED(int, raccept, int socket, struct sockaddr *addr, socklen_t *addrlen)
UNSUPPORTED(int, rconnect, int socket, const struct sockaddr *addr, socklen_t addrlen)
UNSUPPORTED(int, rshutdown, int socket, int how)
UNSUPPORTED(int, rclose, int socket)
UNSUPPORTED(ssize_t, rrecv, int socket, void *buf, size_t len, int flags)
UNSUPPORTED(ssize_t, rrecvfrom, int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
	    socklen_t *addrlen)
UNSUPPORTED(ssize_t, rrecvmsg, int socket, struct msghdr *msg, int flags)
UNSUPPORTED(ssize_t, rsend, int socket, const void *buf, size_t len, int flags)
UNSUPPORTED(ssize_t, rsendto, int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr,
	    socklen_t addrlen)
UNSUPPORTED(ssize_t, rsendmsg, int socket, const struct msghdr *msg, int flags)
UNSUPPORTED(ssize_t, rread, int socket, void *buf, size_t count)
UNSUPPORTED(ssize_t, rreadv, int socket, const struct iovec *iov, int iovcnt)
UNSUPPORTED(ssize_t, rwrite, int socket, const void *buf, size_t count)
UNSUPPORTED(ssize_t, rwritev, int socket, const struct iovec *iov, int iovcnt)
UNSUPPORTED(int, rgetpeername, int socket, struct sockaddr *addr, socklen_t *addrlen)
UNSUPPORTED(int, rgetsockname, int socket, struct sockaddr *addr, socklen_t *addrlen)
UNSUPPORTED(int, rsetsockopt, int socket, int level, int optname, const void *optval, socklen_t optlen)
UNSUPPORTED(int, rgetsockopt, int socket, int level, int optname, void *optval, socklen_t *optlen)
UNSUPPORTED(int, rfcntl, int socket, int cmd, ...)
UNSUPPORTED(off_t, riomap, int socket, void *buf, size_t len, int prot, int flags, off_t offset)
UNSUPPORTED(int, riounmap, int socket, void *buf, size_t len)
UNSUPPORTED(size_t, riowrite, int socket, const void *buf, size_t count, off_t offset, int flags)

/* No descriptor is an rsocket here, so rselect is select (as rpoll is poll, cma.c). */
int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}
