# grid - one non-recursive Makefile.
#
#   make            build gridbroker, gridagent, gridcli into build/bin
#   make deps       install the Debian packages that are missing
#   make test       deps, build, run every test (unit + integration)
#   make test SANITIZE=1   the same under AddressSanitizer + UBSan (build-asan/)
#   make demo       deps, build, broker + three agents on loopback, two jobs
#   make format     clang-format every source file
#   make clean      remove build/ and build-asan/
#
# CC=clang works as well as gcc.

CC ?= cc
SANITIZE ?=
VERSION := 0.1.0

ifeq ($(SANITIZE),1)
BUILD ?= build-asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT := -O1
else
BUILD ?= build
SANFLAGS :=
OPT := -O2
endif

PKGS := libczmq libzmq msgpack lmdb yaml-0.1
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)

CFLAGS ?= $(OPT) -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -DGRID_VERSION=\"$(VERSION)\" \
	-Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
	$(SANFLAGS) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = $(SANFLAGS) $(LDFLAGS)

# Library: everything but the three mains.
LIB_SRC := $(wildcard proto/*.c store/*.c backends/*.c) \
	$(filter-out broker/main.c,$(wildcard broker/*.c)) \
	$(filter-out agent/main.c,$(wildcard agent/*.c)) \
	$(filter-out cli/main.c,$(wildcard cli/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libgrid.a

BINS := $(BUILD)/bin/gridbroker $(BUILD)/bin/gridagent $(BUILD)/bin/gridcli

TEST_LIB_SRC := $(wildcard test/lib/*.c)
TEST_LIB_OBJ := $(TEST_LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard test/test_*.c)
TEST_BINS := $(TEST_SRC:test/%.c=$(BUILD)/test/%)
TEST_TOOL_SRC := $(wildcard test/tools/*.c)
TEST_TOOLS := $(TEST_TOOL_SRC:test/tools/%.c=$(BUILD)/test/tools/%)

DEB_PKGS := gcc make pkg-config libzmq3-dev libczmq-dev libmsgpack-dev \
	liblmdb-dev libyaml-dev libcmocka-dev

.PHONY: all deps test test-build demo format clean check-deps
.DEFAULT_GOAL := all

all: $(BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/gridbroker: $(BUILD)/obj/broker/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/bin/gridagent: $(BUILD)/obj/agent/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/bin/gridcli: $(BUILD)/obj/cli/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/test/%: $(BUILD)/obj/test/%.o $(TEST_LIB_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS) -lm

$(BUILD)/test/tools/%: $(BUILD)/obj/test/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

test-build: $(BINS) $(TEST_BINS) $(TEST_TOOLS)

# deps first, then a fresh make that sees the installed pkg-config files.
test: deps
	@$(MAKE) --no-print-directory test-build
	@BUILD=$(BUILD) sh test/run_tests.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh test/demo.sh

deps:
	@sh test/deps.sh $(DEB_PKGS)

format:
	clang-format -i $(wildcard */*.c */*.h test/*/*.c test/*/*.h)

clean:
	rm -rf build build-asan

-include $(LIB_OBJ:.o=.d) $(TEST_LIB_OBJ:.o=.d) $(TEST_SRC:test/%.c=$(BUILD)/obj/test/%.d)
