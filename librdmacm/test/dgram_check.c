/*
 * dgram_check: datagram rsockets (rocelab's librdmacm/rsocket_dgram.c) in one lab host,
 * compiled against librdmacm-dev as any program is and run by TestUdpong:
 *
 *   dgram_check IPV4-ADDR IPV6-ADDR      (the host's own addresses)
 *
 * For each family: the calls' error paths, each beside the same call on a kernel UDP
 * socket where UDP defines it (the errno must be the kernel's); then two rsockets of
 * the host exchanging datagrams through its soft-RNIC (the first over UDP, telling the
 * receiver the sender's UD QP, the rest as UD SENDs between two QPs of one RNIC):
 * contents, order and source addresses, MSG_PEEK, MSG_TRUNC, rpoll, rconnect'ed
 * sockets and shutdown. Each check prints "ok" or "FAIL" and a name; the exit status is
 * the number of failures.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../libibverbs/test/check.h"

union addr {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr_storage ss;
};

static socklen_t len_of(int family)
{
	return family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static union addr parse(const char *s, int family)
{
	union addr a;
	memset(&a, 0, sizeof(a));
	a.sa.sa_family = family;
	void *dst = family == AF_INET ? (void *)&a.sin.sin_addr : (void *)&a.sin6.sin6_addr;
	if (inet_pton(family, s, dst) != 1) {
		fprintf(stderr, "dgram_check: %s is not an address\n", s);
		exit(2);
	}
	return a;
}

static int same(const union addr *a, const union addr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return 0;
	if (a->sa.sa_family == AF_INET)
		return a->sin.sin_port == b->sin.sin_port && a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
	return a->sin6.sin6_port == b->sin6.sin6_port && !memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, 16);
}

/* errno_of is the errno a failing call left, 0 if it succeeded. */
#define errno_of(call) ((call) < 0 ? errno : 0)

/* bound is a datagram rsocket bound to host's address and an ephemeral port, whose
 * address it fills in. */
static int bound(const union addr *host, union addr *got)
{
	int s = rsocket(host->sa.sa_family, SOCK_DGRAM, 0);
	socklen_t n = sizeof(*got);
	if (s < 0 || rbind(s, &host->sa, len_of(host->sa.sa_family)) || rgetsockname(s, &got->sa, &n))
		return -1;
	return s;
}

/* port_mtu is the active MTU of the first RDMA device's port 1, in bytes. */
static int port_mtu(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_port_attr pa;
	int mtu = c && ibv_query_port(c, 1, &pa) == 0 ? 128 << pa.active_mtu : 0;
	if (c)
		ibv_close_device(c);
	if (l)
		ibv_free_device_list(l);
	return mtu;
}

static void error_paths(const char *fam, const union addr *host)
{
	int family = host->sa.sa_family;
	int r = rsocket(family, SOCK_DGRAM, 0), k = socket(family, SOCK_DGRAM, 0);
	CHECK(r >= 0 && k >= 0, "%s: rsocket(SOCK_DGRAM) and socket(SOCK_DGRAM)", fam);
	int type = 0;
	socklen_t tl = sizeof(type);
	CHECK(rgetsockopt(r, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_DGRAM, "%s: SO_TYPE is SOCK_DGRAM", fam);
	char b[16] = "x";
	int re = errno_of(rsend(r, b, 1, 0)), ke = errno_of(send(k, b, 1, 0));
	CHECK(re == EDESTADDRREQ && re == ke, "%s: rsend unconnected: %s (the kernel's UDP: %s)", fam, strerror(re), strerror(ke));
	re = errno_of(rlisten(r, 1)), ke = errno_of(listen(k, 1));
	CHECK(re == EOPNOTSUPP && re == ke, "%s: rlisten: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	re = errno_of(raccept(r, NULL, NULL)), ke = errno_of(accept(k, NULL, NULL));
	CHECK(re == EOPNOTSUPP && re == ke, "%s: raccept: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	re = errno_of(rshutdown(r, SHUT_RDWR)), ke = errno_of(shutdown(k, SHUT_RDWR));
	CHECK(re == ENOTCONN && re == ke, "%s: rshutdown unconnected: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	re = errno_of(rrecv(r, b, sizeof(b), MSG_DONTWAIT)), ke = errno_of(recv(k, b, sizeof(b), MSG_DONTWAIT));
	CHECK(re == EAGAIN && re == ke, "%s: rrecv MSG_DONTWAIT on nothing: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	re = errno_of(rgetpeername(r, (struct sockaddr *)&(union addr){0}, &(socklen_t){sizeof(union addr)}));
	ke = errno_of(getpeername(k, (struct sockaddr *)&(union addr){0}, &(socklen_t){sizeof(union addr)}));
	CHECK(re == ENOTCONN && re == ke, "%s: rgetpeername unconnected: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	if (family == AF_INET) {
		struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
		re = errno_of(rsendto(r, b, 1, 0, (struct sockaddr *)&v6, sizeof(v6)));
		ke = errno_of(sendto(k, b, 1, 0, (struct sockaddr *)&v6, sizeof(v6)));
		CHECK(re == EAFNOSUPPORT && re == ke, "%s: rsendto an IPv6 address: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	}
	struct pollfd p = {.fd = r, .events = POLLIN | POLLOUT};
	CHECK(rpoll(&p, 1, 0) == 1 && p.revents == POLLOUT, "%s: rpoll of a new rsocket: writable, not readable (0x%x)", fam, p.revents);
	rclose(r);
	close(k);
}

static void exchange(const char *fam, const union addr *host)
{
	union addr aa, ba, from;
	int a = bound(host, &aa), b = bound(host, &ba);
	CHECK(a >= 0 && b >= 0 && !same(&aa, &ba), "%s: two rsockets bound to the host's address, ports %d and %d", fam,
	      ntohs(aa.sin.sin_port), ntohs(ba.sin.sin_port));
	if (a < 0 || b < 0)
		return;
	socklen_t al = len_of(host->sa.sa_family);
	char buf[2100];
	socklen_t fl = sizeof(from);
	CHECK(rsendto(a, "first", 5, 0, &ba.sa, al) == 5, "%s: the first datagram a -> b (over UDP)", fam);
	ssize_t n = rrecvfrom(b, buf, sizeof(buf), 0, &from.sa, &fl);
	CHECK(n == 5 && !memcmp(buf, "first", 5) && same(&from, &aa), "%s: b receives it, from a's address", fam);
	CHECK(rsendto(b, "reply", 5, 0, &aa.sa, al) == 5, "%s: b -> a (a UD SEND: b knows a's QP)", fam);
	fl = sizeof(from);
	n = rrecvfrom(a, buf, sizeof(buf), 0, &from.sa, &fl);
	CHECK(n == 5 && !memcmp(buf, "reply", 5) && same(&from, &ba), "%s: a receives it, from b's address", fam);

	/* 50 datagrams of 1..50 x 20 bytes, as UD SENDs between two QPs of one RNIC */
	int sent = 0, got = 0, in_order = 1;
	for (int i = 1; i <= 50; i++) {
		memset(buf, i, i * 20);
		sent += rsendto(a, buf, i * 20, 0, &ba.sa, al) == i * 20;
	}
	for (int i = 1; i <= 50; i++) {
		fl = sizeof(from);
		n = rrecvfrom(b, buf, sizeof(buf), 0, &from.sa, &fl);
		got += n > 0;
		in_order &= n == i * 20 && buf[0] == i && buf[n - 1] == i && same(&from, &aa);
	}
	CHECK(sent == 50 && got == 50 && in_order, "%s: 50 datagrams of 20..1000 bytes a -> b, each whole and in order", fam);

	/* a UD message is one packet: the largest datagram is the port's MTU (at most a
	 * 2 KiB slot) less the 8 or 24-byte ds_header */
	int mtu = port_mtu(), slot = mtu < 2048 ? mtu : 2048;
	int max = slot - (host->sa.sa_family == AF_INET ? 8 : 24);
	memset(buf, 7, sizeof(buf));
	CHECK(rsendto(a, buf, max, 0, &ba.sa, al) == max && rrecv(b, buf, sizeof(buf), 0) == max,
	      "%s: a datagram of %d bytes, the most a %d-byte MTU takes", fam, max, mtu);
	int e = errno_of(rsendto(a, buf, max + 1, 0, &ba.sa, al));
	CHECK(e == EMSGSIZE, "%s: %d bytes: %s (EMSGSIZE)", fam, max + 1, strerror(e));

	struct pollfd p = {.fd = b, .events = POLLIN};
	CHECK(rpoll(&p, 1, 0) == 0, "%s: rpoll: b has nothing to read", fam);
	rsendto(a, "0123456789", 10, 0, &ba.sa, al);
	CHECK(rpoll(&p, 1, 5000) == 1 && (p.revents & POLLIN), "%s: rpoll wakes for a datagram", fam);
	CHECK(rrecv(b, buf, 4, MSG_PEEK) == 4 && !memcmp(buf, "0123", 4), "%s: MSG_PEEK takes 4 bytes", fam);
	CHECK(rrecv(b, buf, 4, MSG_TRUNC) == 10 && !memcmp(buf, "0123", 4), "%s: MSG_TRUNC returns the datagram's 10 bytes, copies 4", fam);
	rsendto(a, "0123456789", 10, 0, &ba.sa, al);
	struct iovec v = {.iov_base = buf, .iov_len = 4};
	struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &v, .msg_iovlen = 1};
	CHECK(rrecvmsg(b, &m, 0) == 4 && (m.msg_flags & MSG_TRUNC) && same(&from, &aa),
	      "%s: rrecvmsg of 4 bytes: MSG_TRUNC in msg_flags, the source in msg_name", fam);

	CHECK(rconnect(a, &ba.sa, al) == 0, "%s: rconnect a to b", fam);
	fl = sizeof(from);
	CHECK(rgetpeername(a, &from.sa, &fl) == 0 && same(&from, &ba), "%s: rgetpeername is b", fam);
	CHECK(rsend(a, "connected", 9, 0) == 9 && rrecv(b, buf, sizeof(buf), 0) == 9 && !memcmp(buf, "connected", 9),
	      "%s: rsend on the connected rsocket", fam);
	int k = socket(host->sa.sa_family, SOCK_DGRAM, 0);
	connect(k, &ba.sa, al);
	rshutdown(a, SHUT_WR);
	shutdown(k, SHUT_WR);
	int re = errno_of(rsend(a, "x", 1, MSG_NOSIGNAL)), ke = errno_of(send(k, "x", 1, MSG_NOSIGNAL));
	CHECK(re == EPIPE && re == ke, "%s: rsend after SHUT_WR: %s (UDP: %s)", fam, strerror(re), strerror(ke));
	close(k);
	CHECK(rclose(a) == 0 && rclose(b) == 0, "%s: rclose", fam);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: dgram_check IPV4-ADDR IPV6-ADDR\n");
		return 2;
	}
	union addr v4 = parse(argv[1], AF_INET), v6 = parse(argv[2], AF_INET6);
	error_paths("IPv4", &v4);
	error_paths("IPv6", &v6);
	exchange("IPv4", &v4);
	exchange("IPv6", &v6);
	return failures;
}
