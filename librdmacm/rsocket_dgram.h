/*
 * Datagram rsockets (rsocket_dgram.c), as rsocket.c's entry points call them for an
 * rsocket of type SOCK_DGRAM. Each call takes the datagram socket's own lock; none is
 * called with rsocket.c's lock held. nonblock is the descriptor's O_NONBLOCK or the
 * call's MSG_DONTWAIT.
 */
#ifndef ROCELAB_RSOCKET_DGRAM_H
#define ROCELAB_RSOCKET_DGRAM_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct dsock;

/* ds_open makes a datagram rsocket of domain (AF_INET or AF_INET6); its descriptor,
 * the rsocket's, is its UDP socket's, returned in *fd. NULL with errno on failure. */
struct dsock *ds_open(int domain, int *fd);
/* ds_close frees everything of ds and closes its descriptor. */
void ds_close(struct dsock *ds);

int ds_bind(struct dsock *ds, const struct sockaddr *addr, socklen_t len);
int ds_connect(struct dsock *ds, const struct sockaddr *addr, socklen_t len);
int ds_shutdown(struct dsock *ds, int how);

/* ds_send sends the datagram iov holds to dst, or to the connected peer when dst is
 * NULL; it returns the datagram's length. */
ssize_t ds_send(struct dsock *ds, const struct iovec *iov, int iovcnt, const struct sockaddr *dst, socklen_t dstlen,
		int flags, int nonblock);
/* ds_recv takes the next datagram into iov (MSG_PEEK leaves it queued), its source in
 * src; it returns the bytes copied, or the datagram's length with MSG_TRUNC, and sets
 * MSG_TRUNC in *msg_flags (when not NULL) if the datagram was longer than iov. */
ssize_t ds_recv(struct dsock *ds, const struct iovec *iov, int iovcnt, int flags, int nonblock, struct sockaddr *src,
		socklen_t *srclen, int *msg_flags);

/* ds_revents is what ds offers now of events (POLLIN, POLLOUT), after a look at its UDP
 * socket and its CQs that does not block. */
short ds_revents(struct dsock *ds, short events);
/* ds_wait_fd is the descriptor that becomes readable when ds_revents may change; it
 * arms ds's CQs, setting *armed_now when it armed one (look again before sleeping). */
int ds_wait_fd(struct dsock *ds, int *armed_now);

int ds_getsockname(struct dsock *ds, struct sockaddr *addr, socklen_t *len);
int ds_getpeername(struct dsock *ds, struct sockaddr *addr, socklen_t *len);
int ds_setsockopt(struct dsock *ds, int level, int name, const void *val, socklen_t len);
int ds_getsockopt(struct dsock *ds, int level, int name, void *val, socklen_t *len);

#endif
