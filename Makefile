# SPDX-License-Identifier: MIT
# ntbsock — one GNU Makefile for the library, the command, tests and benchmarks.
#
# Layout of build/: build/obj/<dir>/<file>.o (PIC objects), build/libntbsock-core.a (util, conf,
# ntb, transport), build/libntbsock.so (preload + core), build/ntbsock (tools + core),
# build/tests/test_* (CMocka unit tests, one per tests/unit/test_*.c).
#
# Sources are discovered by directory, so adding a file needs no Makefile edit.

VERSION := 0.1.0
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
MANDIR  ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
DESTDIR ?=

CC      ?= gcc
CFLAGS  ?= -O2 -g
PKG_CONFIG ?= pkg-config
PKGS    := libconfig liburcu-bp liburcu-cds libpci

ifeq ($(V),1)
Q :=
else
Q := @
endif

BUILD   ?= build
OBJ     := $(BUILD)/obj

# pkg-config is only consulted for targets that compile; `make deps` must work without it. Its
# errors (a missing .pc file: `make deps` installs the -dev packages) are shown as they come.
pkg_cflags = $(shell $(PKG_CONFIG) --cflags $(PKGS))
# liburcu: headers only; preload/pl_addr.c loads it with dlopen() on first use (linked, its
# constructor would run in every program the library is preloaded into). libpci likewise
# (ntb/backend/pci_find.c): linked, it and its libudev cost every preloaded program 0.6 ms.
pkg_libs   = $(shell $(PKG_CONFIG) --libs $(filter-out liburcu% libpci,$(PKGS)))

ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -fPIC -fvisibility=hidden -I. \
              -DNTBSOCK_VERSION='"$(VERSION)"' -DNTBSOCK_LIBDIR='"$(LIBDIR)"' \
              -DNTBSOCK_BINDIR='"$(BINDIR)"' -DNTBSOCK_SYSCONFDIR='"$(SYSCONFDIR)"' \
              -MMD -MP $(CFLAGS)
LDLIBS_ALL  = $(pkg_libs) -lpthread -ldl -lm

CORE_SRCS    := $(sort $(wildcard util/*.c conf/*.c ntb/*.c ntb/backend/*.c transport/*.c))
PRELOAD_SRCS := $(sort $(wildcard preload/*.c))
TOOL_SRCS    := $(sort $(wildcard tools/*.c))
UNIT_SRCS    := $(sort $(wildcard tests/unit/test_*.c))
# (the io_uring helper needs liburing-dev, which `make deps` installs: without it the helper is
# left out and test_pl_uring says SKIP)
HELPER_SRCS  := $(sort $(filter-out $(if $(shell $(PKG_CONFIG) --exists liburing && echo y),,\
                  tests/helpers/uring_io.c),$(wildcard tests/helpers/*.c)))

CORE_OBJS    := $(CORE_SRCS:%.c=$(OBJ)/%.o)
PRELOAD_OBJS := $(PRELOAD_SRCS:%.c=$(OBJ)/%.o)
TOOL_OBJS    := $(TOOL_SRCS:%.c=$(OBJ)/%.o)
UNIT_BINS    := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
HELPER_BINS  := $(HELPER_SRCS:tests/helpers/%.c=$(BUILD)/tests/%)

CORE_LIB := $(BUILD)/libntbsock-core.a
SO       := $(BUILD)/libntbsock.so
TOOL     := $(BUILD)/ntbsock
# The export map is generated from the X-macro list of intercepted calls (preload/).
EXPORT_MAP := $(BUILD)/libntbsock.map

.PHONY: all deps check check-unit check-integration check-layering check-ivshmem check-ivshmem-apps check-ivshmem-apps-doorbell check-ivshmem-doorbell check-cpython check-unit-load \
        check-load check-asan check-asan-unit check-tsan fuzz soak \
        demo bench install uninstall clean help

all: $(SO) $(TOOL)

help:
	@echo "make            build $(SO) and $(TOOL)"
	@echo "make deps       install the Debian packages the project needs (apt-get, as root)"
	@echo "make check      build and run every unit and integration test"
	@echo "make check-cpython  CPython's socket, asyncio and server test suites over a loopback link (tests/cpython/)"
	@echo "make check-load the failure-path tests without and beside a CPU hog (tests/run_load.sh)"
	@echo "make check-unit-load  the unit suites three times beside a CPU hog"
	@echo "make demo       the comparison against kernel TCP (iperf3, sockperf)"
	@echo "make bench      the full benchmark into bench/results/"
	@echo "make install    install under PREFIX=$(PREFIX) (DESTDIR honoured)"

$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(pkg_cflags) -c -o $@ $<

$(CORE_LIB): $(CORE_OBJS)
	@mkdir -p $(@D)
	$(Q)rm -f $@ && ar rcs $@ $^

$(EXPORT_MAP): preload/intercept.def preload/gen_map.sh
	@mkdir -p $(@D)
	$(Q)sh preload/gen_map.sh preload/intercept.def > $@

$(SO): $(PRELOAD_OBJS) $(CORE_LIB) $(EXPORT_MAP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -fPIC -Wl,--version-script=$(EXPORT_MAP) -Wl,-z,defs -Wl,-z,now \
	    -o $@ $(PRELOAD_OBJS) $(CORE_LIB) $(LDLIBS_ALL)

$(TOOL): $(TOOL_OBJS) $(CORE_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(TOOL_OBJS) $(CORE_LIB) $(LDLIBS_ALL)

# Unit tests link the core archive; tests of preload/ sources link the preload objects too.
$(BUILD)/tests/%: tests/unit/%.c $(CORE_LIB) $(PRELOAD_OBJS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(pkg_cflags) $(shell $(PKG_CONFIG) --cflags cmocka) \
	    -o $@ $< $(if $(findstring test_pl_,$*),$(PRELOAD_OBJS)) $(CORE_LIB) \
	    $(shell $(PKG_CONFIG) --libs cmocka) $(LDLIBS_ALL)

# Helper programs used by integration tests (tests/helpers/*.c), one binary each.
$(BUILD)/tests/%: tests/helpers/%.c $(CORE_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  HELPER  $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(pkg_cflags) -o $@ $< $(CORE_LIB) $(LDLIBS_ALL)

# The io_uring test helper uses liburing, as the programs it stands for do (test_pl_uring).
$(BUILD)/tests/uring_io: LDLIBS_ALL += $(shell $(PKG_CONFIG) --libs liburing)

# --- dependencies (Debian 12) ------------------------------------------------------------------
# Each entry is a Debian package; `make deps` installs the missing ones and is silent otherwise.
DEB_PKGS := gcc make pkg-config libpci-dev liburcu-dev libconfig-dev libcmocka-dev \
            iperf3 sockperf socat iproute2 pciutils procps psmisc coreutils python3 \
            qemu-system-x86 linux-image-amd64 busybox-static cpio gzip \
            clang libclang-rt-14-dev gnuplot-nox strace memcached libpython3.11-testsuite \
            liburing-dev nodejs openjdk-17-jdk-headless

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "deps: installing$$missing"; \
	    if [ "$$(id -u)" != 0 ]; then echo "deps: not root; install these packages:$$missing" >&2; exit 1; fi; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $$missing >/dev/null \
	      || { echo "deps: apt-get failed for:$$missing" >&2; exit 1; }; \
	fi

# --- tests -------------------------------------------------------------------------------------
check: deps
	$(Q)$(MAKE) --no-print-directory all $(UNIT_BINS) $(HELPER_BINS)
	$(Q)$(MAKE) --no-print-directory check-layering check-unit check-asan-unit check-integration

check-layering:
	$(Q)sh tests/check_layering.sh
	$(Q)CC='$(CC)' sh tests/check_rawsys.sh
	$(Q)CC='$(CC)' sh tests/check_rawsys_test.sh
	$(Q)CC='$(CC)' sh tests/check_atomics.sh
	$(Q)CC='$(CC)' sh tests/check_atomics_test.sh

check-unit: $(UNIT_BINS)
	$(Q)sh tests/run_unit.sh $(UNIT_BINS)

check-integration: all $(HELPER_BINS)
	$(Q)BUILD=$(BUILD) sh tests/run_integration.sh

# CPython's socket suites (test_socket's TCP groups, asyncio's socket tests, test_selectors), each
# without ntbsock and under conf/examples/loopback.conf: same results, hundreds of connections
# over the link (tests/cpython/run.sh; ~3 minutes here). Not part of `make check`.
check-cpython: deps all
	$(Q)BUILD=$(BUILD) sh tests/cpython/run.sh

# The failure-path integration tests (peer death, link cut, faults, failover, exit under loss,
# epoll servers), each on the machine as it is and then beside one busy loop per CPU at the
# tests' own nice (tests/run_load.sh; ~11 minutes here; LOAD_TESTS, LOAD_HOGS, LOAD_IDLE=0).
# Not part of `make check`.
check-load: all $(HELPER_BINS)
	$(Q)BUILD=$(BUILD) sh tests/run_load.sh

# The unit suites LOAD_UNIT_RUNS times (default 3) beside one busy loop per CPU (tests/run_load.sh;
# ~5 minutes here): tests that race the helper threads must hold on a machine that is not idle.
# Not part of `make check`.
check-unit-load: $(UNIT_BINS)
	$(Q)LOAD_UNIT='$(UNIT_BINS)' sh tests/run_load.sh

check-ivshmem: deps all $(HELPER_BINS)
	$(Q)BUILD=$(BUILD) sh tests/integration/ivshmem/run.sh

check-ivshmem-apps: deps all
	$(Q)BUILD=$(BUILD) sh tests/integration/ivshmem/apps.sh

check-ivshmem-apps-doorbell: deps all $(HELPER_BINS)
	$(Q)BUILD=$(BUILD) IVSHMEM_APPS_MODE=doorbell sh tests/integration/ivshmem/apps.sh

check-ivshmem-doorbell: deps all $(HELPER_BINS)
	$(Q)BUILD=$(BUILD) sh tests/integration/ivshmem/doorbell.sh

# Sanitizer builds into $(BUILD)/asan and $(BUILD)/tsan (tests/sanitize/run.sh): unit tests, and
# for check-asan/check-tsan the integration tests with the runtime preloaded; any report fails.
check-asan: deps
	$(Q)SAN_BUILD=$(BUILD)/asan sh tests/sanitize/run.sh asan all

check-asan-unit:
	$(Q)SAN_BUILD=$(BUILD)/asan sh tests/sanitize/run.sh asan unit

check-tsan: deps
	$(Q)SAN_BUILD=$(BUILD)/tsan sh tests/sanitize/run.sh tsan all

# libFuzzer targets (tests/fuzz/), each run FUZZ_SECONDS (0: no limit) on its seed corpus, or
# until FUZZ_RUNS executions; FUZZ_TARGETS picks some (default all; tests/fuzz/README.md).
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
FUZZ_TARGETS ?=
fuzz: deps
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_BUILD=$(BUILD)/fuzz \
	    sh tests/fuzz/run.sh $(FUZZ_TARGETS)

# Mixed traffic with the fault decorator for SOAK_SECONDS; byte-exact, no leaks (tests/soak/run.sh);
# then randomized failovers for SOAK_FAILOVER_SECONDS, every round byte-exact (tests/soak/failover.sh).
SOAK_SECONDS ?= 300
SOAK_FAILOVER_SECONDS ?= 120
soak: deps all $(HELPER_BINS)
	$(Q)BUILD=$(BUILD) SOAK_SECONDS=$(SOAK_SECONDS) sh tests/soak/run.sh
	$(Q)BUILD=$(BUILD) SOAK_FAILOVER_SECONDS=$(SOAK_FAILOVER_SECONDS) sh tests/soak/failover.sh

# --- demo / bench ------------------------------------------------------------------------------
demo: deps all
	$(Q)BUILD=$(BUILD) sh bench/demo.sh

bench: deps all $(BUILD)/tests/echo10k $(BUILD)/tests/streams
	$(Q)BUILD=$(BUILD) sh bench/bench.sh

# CRC32C microbenchmark, not built by default: `make crc-bench; taskset -c 1 build/bench/crc_bench`
.PHONY: crc-bench
crc-bench: $(BUILD)/bench/crc_bench

$(BUILD)/bench/crc_bench: bench/crc_bench.c $(CORE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(CORE_LIB) $(LDLIBS_ALL)

# ns per pl_src_is_host() hit (preload/pl_addr.c's cache), not built by default:
# `make src-bench; taskset -c 0,1 build/bench/src_bench 2 2` (threads, seconds)
.PHONY: src-bench
src-bench: $(BUILD)/bench/src_bench

$(BUILD)/bench/src_bench: bench/src_bench.c $(CORE_LIB) $(PRELOAD_OBJS)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(pkg_cflags) -o $@ $< $(PRELOAD_OBJS) $(CORE_LIB) $(LDLIBS_ALL)

# 64-byte slot floor (the 64 B ping-pong of ntbsock perf without the protocol), not built by default:
# `make slot-floor; build/bench/slot_floor 0 1 10`
.PHONY: slot-floor
slot-floor: $(BUILD)/bench/slot_floor

$(BUILD)/bench/slot_floor: bench/slot_floor.c $(CORE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(CORE_LIB) $(LDLIBS_ALL)

# --- install -----------------------------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/ntbsock $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(SYSCONFDIR)
	install -m 0755 $(TOOL) $(DESTDIR)$(BINDIR)/ntbsock
	install -m 0755 $(SO) $(DESTDIR)$(LIBDIR)/ntbsock/libntbsock.so
	install -m 0644 man/ntbsock.1 $(DESTDIR)$(MANDIR)/man1/ntbsock.1
	install -m 0644 man/ntbsock.conf.5 $(DESTDIR)$(MANDIR)/man5/ntbsock.conf.5
	install -m 0644 man/ntbsock.7 $(DESTDIR)$(MANDIR)/man7/ntbsock.7
	install -m 0644 conf/examples/ntbsock.conf $(DESTDIR)$(SYSCONFDIR)/ntbsock.conf.example

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ntbsock $(DESTDIR)$(LIBDIR)/ntbsock/libntbsock.so \
	    $(DESTDIR)$(MANDIR)/man1/ntbsock.1 $(DESTDIR)$(MANDIR)/man5/ntbsock.conf.5 \
	    $(DESTDIR)$(MANDIR)/man7/ntbsock.7 $(DESTDIR)$(SYSCONFDIR)/ntbsock.conf.example
	-rmdir $(DESTDIR)$(LIBDIR)/ntbsock

clean:
	rm -rf $(BUILD)

-include $(shell find $(OBJ) $(BUILD)/tests -name '*.d' 2>/dev/null)
