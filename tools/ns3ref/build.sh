#!/bin/bash
# build.sh SRC_DIR OUT_DIR
#
# Builds the HPCC authors' ns-3.17-based simulator
# (github.com/alibaba-edu/High-Precision-Congestion-Control, dir simulation/)
# as ONE executable, OUT_DIR/third, compiled with `g++ -O2`: every source file
# of the ns-3 modules scratch/third.cc needs, plus scratch/third.cc, compiled
# to objects and linked directly into one binary (no libns3*.so, no waf at
# build or run time).
#
# SRC_DIR is a checkout of the repository (the directory that contains
# simulation/), e.g. produced by
#   git --git-dir=<mirror> archive HEAD | tar -x -C SRC_DIR
#
# Environment knobs (defaults are the reference build):
#   CXX=g++  JOBS=2  NICE=19  OPT=-O2
#
# Needs only: bash, python3 (to read the wscripts' file lists), g++, make.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 SRC_DIR OUT_DIR" >&2
    exit 2
fi

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$1" && pwd)
SIM="$SRC/simulation"
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
CXX=${CXX:-g++}
JOBS=${JOBS:-2}
NICE=${NICE:-19}
OPT=${OPT:--O2}

# Sanity check: we need the ns-3 tree and the HPCC main program.
[ -f "$SIM/scratch/third.cc" ] || { echo "no $SIM/scratch/third.cc" >&2; exit 1; }

START=$(date +%s)

# Step 1: module manifest.
# Which .cc files make up each module, and which headers a module exports
# into build/ns3/, is defined by each src/<module>/wscript (not by a
# directory glob: some model/*.cc files are not part of the build, e.g. the
# NSC TCP files, sqlite output, GTK config store). ns3_manifest.py executes
# those wscripts' build() functions against a fake waf `bld` with the
# configure results a default Linux `waf configure` produces, and follows the
# module dependency lists starting from the modules third.cc includes
# (core, applications, internet, point-to-point). Result: the dependency
# closure core network mpi bridge internet point-to-point stats tools
# config-store applications. Nothing else (wifi, lte, visualizer, python
# bindings, tests, examples, ...) is needed, so nothing else is compiled.
python3 "$HERE/ns3_manifest.py" "$SIM" core applications internet point-to-point \
    > "$OUT/manifest.txt"

# Step 2: the build tree's include directory, OUT/include/ns3/.
# ns-3 sources include each other as "ns3/foo.h"; waf normally copies every
# exported header flat into build/ns3/. We do the same copy.
INC="$OUT/include"
rm -rf "$INC"
mkdir -p "$INC/ns3"
awk -F'\t' '$1=="hdr"{print $3}' "$OUT/manifest.txt" | while read -r h; do
    cp "$SIM/$h" "$INC/ns3/"
done

# Step 3: the per-module aggregator headers ns3/<module>-module.h.
# waf generates these (src/wscript, gen_ns3_module_header_task): a guard
# against use from module code plus one #include per exported header, sorted.
# third.cc includes core-module.h, applications-module.h, internet-module.h.
for m in $(awk -F'\t' '$1=="module"{print $2}' "$OUT/manifest.txt"); do
    guard=$(echo "$m" | tr 'a-z-' 'A-Z_')
    {
        echo
        echo '#ifdef NS3_MODULE_COMPILATION'
        echo '# error "Do not include ns3 module aggregator headers from other modules; these are meant only for end user scripts."'
        echo '#endif'
        echo
        echo "#ifndef NS3_MODULE_$guard"
        echo
        echo '// Module headers:'
        awk -F'\t' -v m="$m" '$1=="hdr" && $2==m {n=split($3,a,"/"); print a[n]}' "$OUT/manifest.txt" \
            | LC_ALL=C sort | while read -r h; do echo "#include \"$h\""; done
        echo '#endif'
    } > "$INC/ns3/$m-module.h"
done

# Step 4: configure-time headers.
# core's `waf configure` writes ns3/core-config.h from feature checks; these
# are the results on Debian 12 / gcc 12 / x86-64 (gcc has __uint128_t but no
# uint128_t, so time arithmetic uses the 128-bit int64x64 implementation,
# exactly as the waf build does; pthread and librt exist).
cat > "$INC/ns3/core-config.h" <<'EOF'
/* Configuration header created by build.sh (equivalent of waf's) - do not edit */
#ifndef _CORE_CONFIG_H_WAF
#define _CORE_CONFIG_H_WAF

#define HAVE___UINT128_T 1
#define INT64X64_USE_128 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_DIRENT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_GETENV 1
#define HAVE_SIGNAL_H 1
#define HAVE_PTHREAD_H 1
#define HAVE_RT 1

#endif /* _CORE_CONFIG_H_WAF */
EOF
# config-store's configure writes ns3/config-store-config.h; with neither
# GTK2 nor libxml2 used it defines nothing.
cat > "$INC/ns3/config-store-config.h" <<'EOF'
/* Configuration header created by build.sh (equivalent of waf's) - do not edit */
#ifndef _CONFIG_STORE_CONFIG_H_WAF
#define _CONFIG_STORE_CONFIG_H_WAF
#endif /* _CONFIG_STORE_CONFIG_H_WAF */
EOF

# Step 5: compile every module source and third.cc, via a generated Makefile
# (make gives parallelism and, on re-runs, only recompiles what changed).
# Flags:
#   -O2                     the reference optimisation level (the waf
#                           "optimized" profile would use -O3 -march=native -g)
#   -std=gnu++11            this 2013-era code predates C++17 (gcc 12 default)
#   -fpermissive            gcc 12 rejects a few pre-C++11 idioms otherwise
#   -w                      silence the thousands of warnings from old code
#   -DNS3_MODULE_COMPILATION  what waf defines for module sources (guards the
#                           aggregator headers); not defined for third.cc
#   -pthread                matches ENABLE_THREADING (system-thread.cc etc.)
#   NS3_ASSERT_ENABLE / NS3_LOG_ENABLE are NOT defined, as in waf's
#   optimized/release profiles.
# -I include/ for "ns3/foo.h"; some sources include headers of their own
# module without the ns3/ prefix (e.g. "log.h", "ipv4-l3-protocol.h" from a
# helper/ file), so the flat header dir and the module's model/ and helper/
# dirs are added as -iquote (quote includes only: include/ns3 has string.h,
# assert.h, config.h... which must not shadow <string.h> etc.).
CXXFLAGS="$OPT -std=gnu++11 -fpermissive -w -pthread"
MK="$OUT/Makefile"
{
    echo "CXX := $CXX"
    echo "CXXFLAGS := $CXXFLAGS -I$INC -iquote $INC/ns3"
    echo ".SUFFIXES:"
    echo "all: $OUT/third"
    objs=""
    while IFS=$'\t' read -r kind mod path; do
        [ "$kind" = src ] || continue
        obj="$OUT/obj/${path%.cc}.o"
        objs="$objs $obj"
        echo "$obj: $SIM/$path"
        echo "	@mkdir -p \$(@D)"
        echo "	\$(CXX) \$(CXXFLAGS) -DNS3_MODULE_COMPILATION -iquote $SIM/src/$mod/model -iquote $SIM/src/$mod/helper -c \$< -o \$@"
    done < "$OUT/manifest.txt"
    obj="$OUT/obj/scratch/third.o"
    objs="$objs $obj"
    echo "$obj: $SIM/scratch/third.cc"
    echo "	@mkdir -p \$(@D)"
    echo "	\$(CXX) \$(CXXFLAGS) -c \$< -o \$@"
    # Step 6: link. Object files (not a static archive) are linked directly so
    # that every module's static initialisers (NS_OBJECT_ENSURE_REGISTERED,
    # NS_LOG_COMPONENT_DEFINE, GlobalValues...) are kept, as they are in the
    # shared-library build; an archive would silently drop unreferenced ones.
    # libstdc++/libc/libm/librt stay the system's shared libraries.
    echo "$OUT/third:$objs"
    echo "	\$(CXX) $OPT -pthread -o \$@ \$^ -lrt"
} > "$MK"

# Every compile is niced (shared machine) and at most $JOBS wide.
nice -n "$NICE" make -f "$MK" -j"$JOBS" all

END=$(date +%s)
echo "built $OUT/third in $((END-START)) s wall"
