#!/bin/sh
# build.sh OUT: compiles rocelab's libibverbs.so.1 into OUT with the system's gcc, against
# libibverbs-dev's <infiniband/verbs.h> (struct layouts must be the real library's).
# The Makefile and the Go tests (cmd/rocelab/ibverbs_lab_test.go) both call it.
set -eu
dir=$(dirname "$0")
out=$1
exec gcc -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror -fPIC -shared \
	-Wl,--version-script="$dir/libibverbs.map" -Wl,-soname,libibverbs.so.1 -Wl,-z,defs \
	-o "$out" "$dir/device.c" "$dir/memory.c" "$dir/objects.c" "$dir/fastpath.c" "$dir/misc.c" "$dir/fatal.c" -lpthread
