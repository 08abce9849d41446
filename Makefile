# grid - one non-recursive Makefile.
#
#   make            build gridbroker, gridagent, gridcli into build/bin
#   make deps       install the Debian packages that are missing
#   make test       deps, build, run every test (unit + integration)
#   make test SANITIZE=1   the same under AddressSanitizer + UBSan (build-asan/)
#   make demo       deps, build, broker + three agents on loopback, two jobs
#   make demo-ha    etcd, two brokers in a cluster, three agents: the active
#                   killed mid-job, the standby finishing it (under a minute)
#   make soak-ha    the cluster under faults for SOAK_SECONDS (600): clients
#                   submitting, the active killed or stopped, agents killed;
#                   every acknowledged job checked (lost, duplicated)
#   make fuzz       every libFuzzer target for FUZZ_SECONDS (60) each; make
#                   test runs each for FUZZ_SHORT_SECONDS (10) as test_fuzz
#   make bench      benchmark: broker + gridswarm at 1,000, 10,000 and 50,000
#                   agents, and one real gridagent (BENCHMARKS.md); prints a
#                   table, writes build/bench/results.json
#   make bench-quick   the 1,000-agent figures only (under two minutes)
#   make bench-queue   the any-node queue run: 20,000 any jobs on 1,000
#                   agents, 50 killed mid-lease (about a minute); writes
#                   build/bench/queue.json
#   make bench-scale   past one process: 10,000 agents direct, 50,000
#                   through 8 gridrelays, swarms of several processes;
#                   scale goals and relay memory (docs/SIZING.md); writes
#                   build/bench/scale.json; BENCH_ARGS=--scale-100k adds
#                   100,000 agents through 16 relays (a few minutes more)
#   make bench-facts   targets by fact resolved over 50,000 nodes in one
#                   registry (test/tools/factbench)
#   make bench-http    the HTTP face: job submits per second over HTTP
#                   (httpload, 64 keep-alive connections) and over ZeroMQ,
#                   and gridcli --wait on a real agent; writes
#                   build/bench/http.json
#   make bench-live    live output: 1,000 swarm agents stream a task's
#                   output while it runs; broker CPU per streamed MiB,
#                   and the slowdown of other jobs' results; writes
#                   build/bench/live.json
#   make bench-files   blobs: a file put of a 4 MiB blob to 1,000 swarm
#                   agents; MiB/s delivered, the broker's peak RSS;
#                   writes build/bench/files.json
#   make bench-ha      a broker alone and a two-broker cluster side by
#                   side at 1,000 agents, then failover times over HA_KILLS
#                   (20) kills of the active; writes build/bench/ha.json
#   make bench-web     the dashboard in headless Chromium against a broker
#                   with 10,000 swarm agents (behind two relays): time to
#                   first rows, long tasks, frame gaps, heap and DOM size
#                   of the overview, the nodes page and a 10,000-node
#                   job's page, beside their budgets; writes
#                   build/bench/web.json (test/browser/bench_web.mjs)
#                   BENCH_ARGS adds gridbench options (gridbench --help);
#                   for bench-web, bench_web.mjs's (--profile,
#                   --profile-only, --web DIR)
#   make install    programs, man pages, configs, units, completion, Python
#                   module (PREFIX=/usr/local, DESTDIR); make uninstall
#   make deb        Debian packages in build/deb, checked by lintian
#   make format     clang-format every source file
#   make check-layers   the include rules between folders (test/check_layers.sh)
#   make clean      remove build/ and build-asan/
#   V=1             show the full compiler command lines
#
# CC=clang works as well as gcc.

CC ?= cc
SANITIZE ?=
V ?=
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @echo "  $(1) $(2)"
endif
# The release (VERSION, one line), the commit it was built from and the
# build date, for --version. A tree without git history (a tarball, the
# packages' copy) passes GRID_COMMIT in, else reads "unknown"; the date
# is SOURCE_DATE_EPOCH's when set (reproducible builds), else today.
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
# (read once per make, not at each use)
ifndef GRID_COMMIT
GRID_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
endif
ifndef GRID_BUILD_DATE
GRID_BUILD_DATE := $(shell date -u -d @$${SOURCE_DATE_EPOCH:-$$(date +%s)} +%Y-%m-%d)
endif

ifeq ($(SANITIZE),1)
BUILD ?= build-asan
# GRID_DEBUG: invariants that a release broker only tolerates are
# asserted (the scheduler's table of cell moves)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	-DGRID_DEBUG
OPT := -O1
else
BUILD ?= build
SANFLAGS :=
OPT := -O2
endif

PKGS := libczmq libzmq msgpack lmdb yaml-0.1 libsystemd libmicrohttpd jansson gnutls \
	libcurl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)

CFLAGS ?= $(OPT) -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -DGRID_VERSION=\"$(VERSION)\" \
	-DGRID_SYSCONFDIR=\"$(sysconfdir)\" \
	-Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
	$(SANFLAGS) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP
# --as-needed: each program records only the libraries it uses (gridagent
# and gridcli need no HTTP library), so its package depends on no more.
ALL_LDFLAGS = $(SANFLAGS) -Wl,--as-needed $(LDFLAGS)
# gridcli starts once per command, and the dynamic loader is most of its
# start: each symbol a library needs is looked up through the loaded
# libraries in load order, and libstdc++ (which libzmq pulls in) and libc
# are where about 1,700 and 1,100 of the 4,400 lookups end, behind some
# fifteen and five others. Named first, they are searched first: a sixth
# fewer instructions in the loader (callgrind) and no binding changes
# (neither exports a symbol that a library before it exports). By soname,
# so that no C++ development package is needed.
LOOKUP_FIRST = -Wl,--no-as-needed -lc -l:libstdc++.so.6 -Wl,--as-needed

# Library: everything but the three mains.
LIB_SRC := $(wildcard proto/*.c store/*.c backends/*.c client/*.c ha/*.c) \
	$(filter-out broker/main.c,$(wildcard broker/*.c)) $(wildcard broker/req/*.c) \
	$(filter-out agent/main.c,$(wildcard agent/*.c)) \
	$(filter-out cli/main.c,$(wildcard cli/*.c)) \
	$(filter-out relay/main.c,$(wildcard relay/*.c))
# Assembler files that build data into the library (the OpenAPI text)
LIB_ASM := broker/openapi.S
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/webfiles_data.o \
	$(LIB_ASM:%.S=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libgrid.a

BINS := $(BUILD)/bin/gridbroker $(BUILD)/bin/gridagent $(BUILD)/bin/gridcli \
	$(BUILD)/bin/gridrelay

TEST_LIB_SRC := $(wildcard test/lib/*.c)
TEST_LIB_OBJ := $(TEST_LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard test/test_*.c)
TEST_BINS := $(TEST_SRC:test/%.c=$(BUILD)/test/%)
# test/tools/zmtp.c is a module of gridswarm (and of test_zmtp), not a
# tool; gridbench_ha.c and gridbench_raw.c are modules of gridbench
TEST_TOOL_SRC := $(filter-out test/tools/zmtp.c test/tools/gridbench_ha.c \
	test/tools/gridbench_raw.c,$(wildcard test/tools/*.c))
TEST_TOOLS := $(TEST_TOOL_SRC:test/tools/%.c=$(BUILD)/test/tools/%)
ZMTP_OBJ := $(BUILD)/obj/test/tools/zmtp.o
BENCH_HA_OBJ := $(BUILD)/obj/test/tools/gridbench_ha.o \
	$(BUILD)/obj/test/tools/gridbench_raw.o

DEB_PKGS := gcc make pkg-config libzmq3-dev libczmq-dev libmsgpack-dev \
	liblmdb-dev libyaml-dev libcmocka-dev libsystemd-dev scdoc \
	libmicrohttpd-dev libjansson-dev libgnutls28-dev libcurl4-openssl-dev

# Fuzzing: clang's libFuzzer with ASan and UBSan. Only make fuzz and make
# test need these packages.
FUZZ_PKGS := clang libclang-rt-14-dev
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SHORT_SECONDS ?= 10
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_TARGETS := $(filter-out fuzz_seeds,$(filter fuzz_%,$(TEST_TOOL_SRC:test/tools/%.c=%)))
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/bin/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_DIR)/obj/gen/webfiles_data.o \
	$(LIB_ASM:%.S=$(FUZZ_DIR)/obj/%.o)
FUZZ_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -DGRID_VERSION=\"$(VERSION)\" \
	-DGRID_SYSCONFDIR=\"$(sysconfdir)\" \
	-DGRID_FUZZ_LIBFUZZER -Wall -Wextra -Werror -Wshadow \
	-Wno-unused-parameter -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer-no-link $(FUZZ_SANITIZE) $(PKG_CFLAGS) -MMD -MP
FUZZ_SEEDS := $(BUILD)/test/tools/fuzz_seeds

# Objects are kept between runs (they are intermediate files of pattern
# rules, which make would otherwise delete).
.SECONDARY:

.PHONY: all man deps test test-build test-deps demo format clean FORCE \
	check-deps check-layers fuzz fuzz-build fuzz-deps bench bench-quick \
	demo-ha soak-ha bench-ha \
	bench-queue bench-scale bench-http bench-live bench-facts bench-web \
	bench-files install \
	uninstall deb
.DEFAULT_GOAL := all

all: $(BINS) man

# Man pages, from scdoc sources in docs/man (scdoc is in make deps; a plain
# make without it skips them with a note).
MAN_SRC := $(wildcard docs/man/*.scd)
MAN_PAGES := $(MAN_SRC:docs/man/%.scd=$(BUILD)/man/%)
SCDOC := $(shell command -v scdoc 2>/dev/null)

ifneq ($(SCDOC),)
man: $(MAN_PAGES)
else
man:
	@echo "  (scdoc is not installed: man pages not built; make deps installs it)"
endif

$(BUILD)/man/%: docs/man/%.scd
	@mkdir -p $(dir $@)
	$(call say,SCDOC,$<)
	$(Q)scdoc <$< >$@.tmp && mv $@.tmp $@

# Every object holds GRID_VERSION: a new release rebuilds them all
$(BUILD)/obj/%.o: %.c VERSION
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# The dashboard (web/) built into gridbroker: web/embed.sh turns its files
# into a C table for broker/webfiles.c (generated, under $(BUILD)/gen).
WEB_FILES := $(sort $(wildcard web/*.html web/*.css web/*.js web/*.svg))
WEB_GEN := $(BUILD)/gen/webfiles_data.c

$(WEB_GEN): web/embed.sh $(WEB_FILES)
	$(call say,GEN,$@)
	$(Q)sh web/embed.sh $@ $(WEB_FILES)

$(BUILD)/obj/gen/webfiles_data.o: $(WEB_GEN) broker/webfiles.h
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -I. -c $< -o $@

# The commit and date reach only proto/cmdline.c, through a stamp file
# rewritten when they change (so a new commit rebuilds one object).
BUILDINFO := $(BUILD)/gen/buildinfo
$(BUILDINFO): FORCE
	@mkdir -p $(dir $@)
	@echo "$(VERSION) $(GRID_COMMIT) $(GRID_BUILD_DATE)" >$@.new; \
	if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi
$(BUILD)/obj/proto/cmdline.o: $(BUILDINFO)
$(BUILD)/obj/proto/cmdline.o: ALL_CFLAGS += -DGRID_COMMIT=\"$(GRID_COMMIT)\" \
	-DGRID_BUILD_DATE=\"$(GRID_BUILD_DATE)\"
FORCE:

# .incbin reads the file at assembly time: the object depends on it
$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(call say,AS,$<)
	$(Q)$(CC) -c $< -o $@

$(BUILD)/obj/broker/openapi.o $(FUZZ_DIR)/obj/broker/openapi.o: docs/openapi.json

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

$(BUILD)/bin/gridbroker: $(BUILD)/obj/broker/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/bin/gridagent: $(BUILD)/obj/agent/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/bin/gridcli: $(BUILD)/obj/cli/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LOOKUP_FIRST) $(PKG_LIBS) -lm

$(BUILD)/bin/gridrelay: $(BUILD)/obj/relay/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/test/%: $(BUILD)/obj/test/%.o $(TEST_LIB_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS) -lm

$(BUILD)/test/tools/%: $(BUILD)/obj/test/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/test/tools/gridswarm $(BUILD)/test/test_zmtp: $(ZMTP_OBJ)
$(BUILD)/test/tools/gridbench: $(BENCH_HA_OBJ)

test-build: $(BINS) $(TEST_BINS) $(TEST_TOOLS) $(BUILD)/test/test_python \
	$(BUILD)/test/test_it_upgrade \
	$(BUILD)/test/test_packaging $(BUILD)/test/test_it_browser \
	$(BUILD)/test/test_layers man

$(FUZZ_DIR)/obj/%.o: %.c VERSION
	@mkdir -p $(dir $@)
	$(call say,FUZZCC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/obj/gen/webfiles_data.o: $(WEB_GEN) broker/webfiles.h
	@mkdir -p $(dir $@)
	$(call say,FUZZCC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -I. -c $< -o $@

$(FUZZ_DIR)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(call say,FUZZAS,$<)
	$(Q)$(FUZZ_CC) -c $< -o $@

$(FUZZ_DIR)/libgrid.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

$(FUZZ_DIR)/bin/%: $(FUZZ_DIR)/obj/test/tools/%.o $(FUZZ_DIR)/libgrid.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SANITIZE) -o $@ $^ $(PKG_LIBS) -lm

# The short fuzz run of make test, as one more suite for run_tests.sh.
$(BUILD)/test/test_fuzz: test/fuzz.sh $(FUZZ_BINS) $(FUZZ_SEEDS)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s" %s "%s"\n' "$(abspath test/fuzz.sh)" \
		"$(abspath $(FUZZ_DIR))" "$(FUZZ_SHORT_SECONDS)" \
		"$(abspath $(FUZZ_SEEDS))" >$@
	@chmod +x $@

fuzz-build: $(FUZZ_BINS) $(FUZZ_SEEDS) $(BUILD)/test/test_fuzz

# The include rules between folders (make check-layers, sizes strict), one
# more suite.
$(BUILD)/test/test_layers: test/check_layers.sh test/check_layers_selftest.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\ncd "%s" || exit 1\nsh test/check_layers_selftest.sh && sh test/check_layers.sh --strict-size && echo "[  PASSED  ] 2 test(s)."\n' \
		"$(abspath .)" >$@
	@chmod +x $@

# The packaging checks (man pages, units, install, deb, purge in a
# throwaway root, bash completion), one more suite.
$(BUILD)/test/test_packaging: test/packaging.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s" "%s" "%s"\n' "$(abspath test/packaging.sh)" \
		"$(abspath .)" "$(abspath $(BUILD))" "$(SANITIZE)" >$@
	@chmod +x $@

# Mixed releases (test/upgrade.sh): the previous release of RELEASES,
# built once into ~/.cache/grid/releases, against this tree's programs.
$(BUILD)/test/test_it_upgrade: test/upgrade.sh RELEASES
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s" "%s"\n' "$(abspath test/upgrade.sh)" \
		"$(abspath .)" "$(abspath $(BUILD))" >$@
	@chmod +x $@

# The Python module's tests, as one more suite for run_tests.sh.
$(BUILD)/test/test_python: test/python.sh $(wildcard python/grid/*.py python/tests/*.py)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s"\n' "$(abspath test/python.sh)" \
		"$(abspath .)" >$@
	@chmod +x $@

# The dashboard in headless Chromium (test/browser), one more suite; its
# screenshots go to $(BUILD)/test-artifacts.
$(BUILD)/test/test_it_browser: test/browser.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s" "%s"\n' "$(abspath test/browser.sh)" \
		"$(abspath .)" "$(abspath $(BUILD))" >$@
	@chmod +x $@

fuzz-deps:
	@sh test/deps.sh $(FUZZ_PKGS)

# Every target for FUZZ_SECONDS each (make fuzz FUZZ_SECONDS=600).
fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory fuzz-build
	@sh test/fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_SEEDS)

# Debian's python3 with pyzmq and msgpack, for the Python module's tests;
# systemd-analyze, man and the Debian tools, for the packaging checks;
# curl and openssl, for the HTTP tests (requests, a self-signed TLS cert);
# bash-completion, whose helpers gridcli's completion is checked with.
PY_PKGS := python3 python3-zmq python3-msgpack
# Debian's chromium for the browser test, driven from Node: Debian's nodejs
# and npm, unless a node (or npm) is already installed. Debian's prometheus
# for promtool, which checks the metrics text.
BROWSER_PKGS := chromium $(if $(shell command -v node 2>/dev/null),,nodejs) \
	$(if $(shell command -v npm 2>/dev/null),,npm)
TEST_PKGS = $(PY_PKGS) systemd man-db prometheus curl openssl $(DEB_TOOLS) \
	bash-completion etcd-server etcd-client $(BROWSER_PKGS)

test-deps:
	@sh test/deps.sh $(TEST_PKGS)
	@$(MAKE) --no-print-directory test/browser/node_modules/.package-lock.json

# playwright-core, as pinned by test/browser/package-lock.json.
test/browser/node_modules/.package-lock.json: test/browser/package.json \
		test/browser/package-lock.json
	$(call say,NPM,ci test/browser)
	$(Q)cd test/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci \
		--no-audit --no-fund --loglevel=error

# deps first, then a fresh make that sees the installed pkg-config files.
test: deps fuzz-deps test-deps
	@$(MAKE) --no-print-directory test-build fuzz-build
	@BUILD=$(BUILD) sh test/run_tests.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh test/demo.sh

# etcd (one member, on loopback) and two brokers in a cluster: the active
# killed in the middle of a job, the standby finishing it.
HA_PKGS := etcd-server etcd-client jq
demo-ha: deps
	@sh test/deps.sh $(HA_PKGS)
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh test/demo_ha.sh

# The cluster under faults for SOAK_SECONDS, checked like a set (not in
# make test): every acknowledged job there, ended, nothing run twice.
SOAK_SECONDS ?= 600
soak-ha: deps
	@sh test/deps.sh $(HA_PKGS) python3
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) SOAK_SECONDS=$(SOAK_SECONDS) python3 test/soak_ha.py

deps:
	@sh test/deps.sh $(DEB_PKGS)

# Benchmarks: gridbench starts and stops every process itself.
BENCH_TOOLS := $(BUILD)/test/tools/gridbench $(BUILD)/test/tools/gridswarm \
	$(BUILD)/test/tools/gridsink
BENCH_OUT := $(BUILD)/bench/results.json

bench: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@$(BUILD)/test/tools/gridbench --out $(BENCH_OUT) $(BENCH_ARGS)

bench-quick: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@$(BUILD)/test/tools/gridbench --quick --out $(BENCH_OUT) $(BENCH_ARGS)

bench-queue: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@$(BUILD)/test/tools/gridbench --queue --out $(BUILD)/bench/queue.json $(BENCH_ARGS)

bench-scale: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@$(BUILD)/test/tools/gridbench --scale --out $(BUILD)/bench/scale.json $(BENCH_ARGS)

bench-http: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS) $(BUILD)/test/tools/httpload
	@$(BUILD)/test/tools/gridbench --http --out $(BUILD)/bench/http.json $(BENCH_ARGS)

bench-live: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@$(BUILD)/test/tools/gridbench --live --out $(BUILD)/bench/live.json $(BENCH_ARGS)

# The dashboard at fleet size in headless Chromium (BENCHMARKS.md, "The
# dashboard"): needs the browser test's packages and playwright-core.
bench-web: deps
	@sh test/deps.sh $(BROWSER_PKGS)
	@$(MAKE) --no-print-directory test/browser/node_modules/.package-lock.json \
		$(BINS) $(BENCH_TOOLS)
	@GRID_BIN=$(abspath $(BUILD))/bin GRID_TOOLS=$(abspath $(BUILD))/test/tools \
		GRID_SRC=$(CURDIR) GRID_BENCH_OUT=$(abspath $(BUILD))/bench/web.json \
		node test/browser/bench_web.mjs $(BENCH_ARGS)

# Blobs: one file put of a 4 MiB blob to 1,000 swarm agents that fetch it
# over their connections: MiB/s delivered and the broker's peak RSS.
bench-files: deps
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@mkdir -p $(BUILD)/bench
	@$(BUILD)/test/tools/gridbench --files --out $(BUILD)/bench/files.json $(BENCH_ARGS)

# Targets by fact over 50,000 nodes of one registry, in process.
bench-facts: $(BUILD)/test/tools/factbench
	@$(BUILD)/test/tools/factbench $(BENCH_ARGS)

# A broker alone and the same broker as a cluster's active, side by side,
# then failover times over HA_KILLS kills of the active (BENCHMARKS.md).
HA_KILLS ?= 20
bench-ha: deps
	@sh test/deps.sh $(HA_PKGS)
	@$(MAKE) --no-print-directory $(BINS) $(BENCH_TOOLS)
	@$(BUILD)/test/tools/gridbench --ha --agents 1000 --no-agent \
		--ha-kills $(HA_KILLS) --out $(BUILD)/bench/ha.json $(BENCH_ARGS)

# ---------------------------------------------------------------------
# Install: make install [PREFIX=/usr/local] [DESTDIR=...]. The daemons go
# to sbin, gridcli to bin; example configs to $(sysconfdir)/grid without
# replacing a file that is there; systemd units with the paths filled in.
# make uninstall removes what install wrote (a config you changed stays).
PREFIX ?= /usr/local
# The programs read their configs from here (built in), whatever PREFIX.
sysconfdir ?= /etc
ifeq ($(PREFIX),/usr)
unitdir ?= /lib/systemd/system
pythondir ?= $(PREFIX)/lib/python3/dist-packages
else
unitdir ?= $(PREFIX)/lib/systemd/system
PY_VERSION := $(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
pythondir ?= $(PREFIX)/lib/python$(PY_VERSION)/dist-packages
endif
bindir ?= $(PREFIX)/bin
sbindir ?= $(PREFIX)/sbin
mandir ?= $(PREFIX)/share/man
sysusersdir ?= $(PREFIX)/lib/sysusers.d
completiondir ?= $(PREFIX)/share/bash-completion/completions
INSTALL ?= install

UNITS := gridbroker.service gridagent.service gridrelay.service
CONFS := gridbroker.yaml gridagent.yaml gridcli.yaml gridrelay.yaml
PY_FILES := $(notdir $(wildcard python/grid/*.py))

install: all
	@test -n "$(SCDOC)" || { echo "install needs the man pages: make deps (scdoc)" >&2; exit 1; }
	$(INSTALL) -d $(DESTDIR)$(bindir) $(DESTDIR)$(sbindir) \
		$(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man5 \
		$(DESTDIR)$(mandir)/man7 $(DESTDIR)$(mandir)/man8 \
		$(DESTDIR)$(sysconfdir)/grid $(DESTDIR)$(unitdir) \
		$(DESTDIR)$(sysusersdir) $(DESTDIR)$(completiondir) \
		$(DESTDIR)$(pythondir)/grid
	$(INSTALL) -m 0755 $(BUILD)/bin/gridcli $(DESTDIR)$(bindir)/gridcli
	$(INSTALL) -m 0755 $(BUILD)/bin/gridbroker $(BUILD)/bin/gridagent \
		$(BUILD)/bin/gridrelay $(DESTDIR)$(sbindir)/
	for page in $(MAN_PAGES); do \
		section=$${page##*.}; \
		$(INSTALL) -m 0644 $$page $(DESTDIR)$(mandir)/man$$section/ || exit 1; \
	done
	for conf in $(CONFS); do \
		if [ -e $(DESTDIR)$(sysconfdir)/grid/$$conf ]; then \
			echo "  keeping $(DESTDIR)$(sysconfdir)/grid/$$conf"; \
		else \
			$(INSTALL) -m 0644 conf/$$conf $(DESTDIR)$(sysconfdir)/grid/$$conf || exit 1; \
		fi; \
	done
	for unit in $(UNITS); do \
		sed -e 's|@sbindir@|$(sbindir)|g' -e 's|@sysconfdir@|$(sysconfdir)|g' \
			packaging/systemd/$$unit.in >$(DESTDIR)$(unitdir)/$$unit || exit 1; \
		chmod 0644 $(DESTDIR)$(unitdir)/$$unit; \
	done
	$(INSTALL) -m 0644 packaging/sysusers/grid.conf $(DESTDIR)$(sysusersdir)/grid.conf
	$(INSTALL) -m 0644 packaging/completion/gridcli $(DESTDIR)$(completiondir)/gridcli
	for py in $(PY_FILES); do \
		$(INSTALL) -m 0644 python/grid/$$py $(DESTDIR)$(pythondir)/grid/$$py || exit 1; \
	done

uninstall:
	rm -f $(DESTDIR)$(bindir)/gridcli $(DESTDIR)$(sbindir)/gridbroker \
		$(DESTDIR)$(sbindir)/gridagent $(DESTDIR)$(sbindir)/gridrelay
	rm -f $(addprefix $(DESTDIR)$(mandir)/man,$(foreach p,$(notdir $(MAN_PAGES)),$(subst .,,$(suffix $(p)))/$(p)))
	rm -f $(addprefix $(DESTDIR)$(unitdir)/,$(UNITS))
	rm -f $(DESTDIR)$(sysusersdir)/grid.conf $(DESTDIR)$(completiondir)/gridcli
	rm -rf $(DESTDIR)$(pythondir)/grid
	for conf in $(CONFS); do \
		if cmp -s conf/$$conf $(DESTDIR)$(sysconfdir)/grid/$$conf; then \
			rm -f $(DESTDIR)$(sysconfdir)/grid/$$conf; \
		elif [ -e $(DESTDIR)$(sysconfdir)/grid/$$conf ]; then \
			echo "  keeping $(DESTDIR)$(sysconfdir)/grid/$$conf (changed)"; \
		fi; \
	done
	-rmdir $(DESTDIR)$(sysconfdir)/grid 2>/dev/null

# Debian packages (packaging/deb.sh): build/deb/*.deb, checked by lintian.
DEB_TOOLS := dpkg-dev debhelper fakeroot lintian adduser

deb: deps
	@sh test/deps.sh $(DEB_TOOLS)
	@$(MAKE) --no-print-directory all
	@sh packaging/deb.sh $(BUILD)

# The include rules between folders, after the check's own test.
check-layers:
	@sh test/check_layers_selftest.sh
	@sh test/check_layers.sh --strict-size

format:
	clang-format -i $(wildcard */*.c */*.h test/*/*.c test/*/*.h)

clean:
	rm -rf build build-asan

# Every object's dependency file, the four mains' included: a header
# change must rebuild each object that includes it.
MAIN_DEPS := $(BUILD)/obj/broker/main.d $(BUILD)/obj/agent/main.d \
	$(BUILD)/obj/cli/main.d $(BUILD)/obj/relay/main.d
-include $(LIB_OBJ:.o=.d) $(TEST_LIB_OBJ:.o=.d) $(TEST_SRC:test/%.c=$(BUILD)/obj/test/%.d) $(MAIN_DEPS)
-include $(TEST_TOOL_SRC:test/tools/%.c=$(BUILD)/obj/test/tools/%.d)
-include $(ZMTP_OBJ:.o=.d) $(BENCH_HA_OBJ:.o=.d)
-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_TARGETS:%=$(FUZZ_DIR)/obj/test/tools/%.d)
