#!/bin/sh
# build.sh OUT: compiles rocelab's librdmacm.so.1 into OUT with the system's gcc, against
# librdmacm-dev's <rdma/rdma_cma.h>, linked to rocelab's libibverbs.so.1 that must be
# next to OUT already (it calls that library's ROCELAB_PRIVATE symbols). The Makefile and
# the Go tests (cmd/rocelab/rdmacm_lab_test.go) both call it.
set -eu
dir=$(dirname "$0")
out=$1
lib=$(dirname "$out")
exec gcc -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror -fPIC -shared \
	-Wl,--version-script="$dir/librdmacm.map" -Wl,-soname,librdmacm.so.1 -Wl,-z,defs \
	-o "$out" "$dir/cma.c" "$dir/rsocket.c" "$dir/rsocket_dgram.c" "$dir/unsupported.c" "$lib/libibverbs.so.1" -lpthread
