/*
 * Memory regions over the application's own memory.
 *
 * The lab process can only reach memory it can map, and an application's malloc'd
 * buffer is private anonymous memory. So ibv_reg_mr moves the pages it covers onto one
 * memfd per process, the "arena", in place: the arena's file offset of a page is the
 * page's virtual address (a sparse file of 2^47 bytes), the page's current contents are
 * copied there and the arena is mapped over the page (MAP_FIXED|MAP_SHARED) with the
 * page's protection. The buffer keeps its address and its contents, and is from then on
 * the same physical memory as the lab process's mapping of (arena, offset = address): an
 * RDMA WRITE lands in the application's buffer. Overlapping and repeated registrations
 * need no bookkeeping: a page already in the arena at its own address is left alone,
 * which /proc/self/maps tells (device and inode of the arena, offset = address).
 *
 * Pages of the calling thread's own stack (a buffer in main's or a thread's frame) are
 * moved from a stack of the library's: between the copy and the mmap over them, code
 * running on them would write its frames (the return address of mmap itself) into the
 * page being replaced, and come back to the copy taken before (stack_move).
 *
 * The pages stay in the arena after ibv_dereg_mr (the application still owns them).
 * They are MADV_DONTFORK, as ibv_fork_init makes registered memory with rdma-core: a
 * child does not share them with its parent (it would, being MAP_SHARED).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <ucontext.h>
#include <unistd.h>

#include "rocelab.h"

#define ARENA_SIZE (1ull << 47)

static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static int arena_fd = -1;
static dev_t arena_dev;
static ino_t arena_ino;

static int arena_open(void)
{
	if (arena_fd >= 0)
		return 0;
	int fd = memfd_create("rocelab-verbs-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return errno;
	struct stat st;
	if (ftruncate(fd, ARENA_SIZE) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
	    fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return e;
	}
	arena_fd = fd;
	arena_dev = st.st_dev;
	arena_ino = st.st_ino;
	return 0;
}

/* move_pages puts [start, end) (one mapping's part, protection prot) into the arena. */
static int move_pages(uintptr_t start, uintptr_t end, int prot)
{
	if (!(prot & PROT_READ) && mprotect((void *)start, end - start, prot | PROT_READ) < 0)
		return errno;
	ssize_t n = pwrite(arena_fd, (void *)start, end - start, (off_t)start);
	if (n != (ssize_t)(end - start))
		return n < 0 ? errno : EFAULT;
	if (mmap((void *)start, end - start, prot, MAP_SHARED | MAP_FIXED, arena_fd, (off_t)start) == MAP_FAILED)
		return errno;
	madvise((void *)start, end - start, MADV_DONTFORK);
	return 0;
}

/* The move stack_move runs off the caller's stack (under arena_mu). */
static struct {
	uintptr_t start, end;
	int prot, err;
	ucontext_t caller, mover;
} off_stack;

static void move_off_stack(void)
{
	off_stack.err = move_pages(off_stack.start, off_stack.end, off_stack.prot);
}

/* stack_move is move_pages for pages of the calling thread's stack: it switches to a
 * stack of its own for the copy and the mmap, so that nothing writes to the pages
 * between the two, and switches back to the moved pages, identical. */
static int stack_move(uintptr_t start, uintptr_t end, int prot)
{
	enum { size = 64 << 10 };
	void *stack = malloc(size);
	if (!stack)
		return ENOMEM;
	off_stack.start = start, off_stack.end = end, off_stack.prot = prot;
	if (getcontext(&off_stack.mover) < 0) {
		free(stack);
		return errno;
	}
	off_stack.mover.uc_stack.ss_sp = stack;
	off_stack.mover.uc_stack.ss_size = size;
	off_stack.mover.uc_link = &off_stack.caller;
	makecontext(&off_stack.mover, move_off_stack, 0);
	int err = swapcontext(&off_stack.caller, &off_stack.mover) < 0 ? errno : off_stack.err;
	free(stack);
	return err;
}

/* read_maps returns /proc/self/maps whole, read before any page moves (moving pages
 * changes the file under a reader). */
static char *read_maps(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf)
			break;
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (n == 0) {
			buf[len] = 0;
			break;
		}
		len += n;
	}
	close(fd);
	return buf;
}

/* rl_share_range makes the pages [start, end) arena pages and returns the arena. */
int rl_share_range(uintptr_t start, uintptr_t end, int *fd)
{
	if (end <= start || end > ARENA_SIZE)
		return EINVAL;
	pthread_mutex_lock(&arena_mu);
	int err = arena_open();
	char *maps = err ? NULL : read_maps();
	if (!err && !maps)
		err = ENOMEM;
	uintptr_t covered = start; /* every page below this is mapped and handled */
	char *save = NULL;
	for (char *line = maps ? strtok_r(maps, "\n", &save) : NULL; !err && covered < end && line;
	     line = strtok_r(NULL, "\n", &save)) {
		uintptr_t lo, hi;
		unsigned long long off, ino;
		unsigned maj, mnr;
		char perms[8];
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %x:%x %llu", &lo, &hi, perms, &off, &maj, &mnr, &ino) != 7)
			continue;
		if (hi <= covered || lo >= end)
			continue;
		if (lo > covered) {
			err = EFAULT; /* a hole: the range is not all mapped */
			break;
		}
		uintptr_t s = covered, e = hi < end ? hi : end;
		int ours = ino == arena_ino && makedev(maj, mnr) == arena_dev && off == lo;
		if (!ours) {
			int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
				   (perms[2] == 'x' ? PROT_EXEC : 0);
			uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
			err = sp >= lo && sp < hi ? stack_move(s, e, prot) : move_pages(s, e, prot);
		}
		covered = e;
	}
	if (!err && covered < end)
		err = EFAULT;
	free(maps);
	*fd = arena_fd;
	pthread_mutex_unlock(&arena_mu);
	return err;
}
