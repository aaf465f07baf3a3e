# tfc — one Makefile for the library, the tools, the tests, the fuzzers and the benchmarks.
#
#   make              library (static + shared) and tools into build/<config>/ and bin/
#   make test         the CUnit suites (no GPU needed)
#   make fuzz         libFuzzer targets (clang, ASan+UBSan); FUZZ_SECONDS=600 make fuzz-run
#   make bench        CPU benchmarks against PyTorch (see bench/README.md)
#   make run          installs dependencies and data, trains configs/fashion_cnn.yaml
#   make deps         installs the Debian packages (needs root or sudo)
#
# Options: DEBUG=1 (ASan+UBSan, -O1), V=1 (echo commands), CUDA=0|1 (default: auto),
# DEPS_PREFIX=DIR (libraries unpacked from .debs under DIR, e.g. on a bare GPU machine).

CC      ?= cc
NVCC    ?= nvcc
DEBUG   ?= 0
V       ?= 0
CUDA    ?= auto
DEPS_PREFIX ?=

VERSION := 0.1.0
CONFIG  := $(if $(filter 1,$(DEBUG)),debug,release)
BUILD   := build/$(CONFIG)
BIN     := bin

ifeq ($(V),1)
Q :=
else
Q := @
endif

MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
# Where OpenBLAS's OpenMP build lives: one OpenMP thread pool serves OpenBLAS and our loops.
BLAS_INC := $(firstword $(wildcard $(DEPS_PREFIX)/usr/include/$(MULTIARCH)/openblas-openmp \
                                   /usr/include/$(MULTIARCH)/openblas-openmp))
BLAS_LIB := $(firstword $(wildcard $(DEPS_PREFIX)/usr/lib/$(MULTIARCH)/openblas-openmp \
                                   /usr/lib/$(MULTIARCH)/openblas-openmp))

PREFIX_INC := $(if $(DEPS_PREFIX),-I$(DEPS_PREFIX)/usr/include -I$(DEPS_PREFIX)/usr/include/$(MULTIARCH))
comma := ,
PREFIX_LIB := $(if $(DEPS_PREFIX),-L$(DEPS_PREFIX)/usr/lib/$(MULTIARCH) -Wl$(comma)-rpath$(comma)$(abspath $(DEPS_PREFIX))/usr/lib/$(MULTIARCH))

WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation
SAN     := -fsanitize=address,undefined
OPT_DEBUG   := -O1 -g $(SAN) -fno-omit-frame-pointer
OPT_RELEASE := -O2 -g
OPT     := $(if $(filter 1,$(DEBUG)),$(OPT_DEBUG),$(OPT_RELEASE))
CPPFLAGS_ALL := -Iinclude -Isrc $(if $(BLAS_INC),-I$(BLAS_INC)) $(PREFIX_INC) \
                -D_GNU_SOURCE -DTFC_VERSION=\"$(VERSION)\"
CFLAGS_ALL   := -std=c11 $(WARN) $(OPT) -fPIC -fopenmp -MMD -MP $(CFLAGS)
LDLIBS_ALL   := $(PREFIX_LIB) $(if $(BLAS_LIB),-L$(BLAS_LIB) -Wl$(comma)-rpath$(comma)$(BLAS_LIB)) \
                -lopenblas -lyaml -ljansson -lpng -ljpeg -lz -lm -lpthread
LDFLAGS_ALL  := -fopenmp $(if $(filter 1,$(DEBUG)),$(SAN)) $(LDFLAGS)

# ---- CUDA: built whenever nvcc and cuDNN are found, unless CUDA=0 --------------------------
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDNN_H   := $(firstword $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h \
                                    /usr/local/include/cudnn.h $(DEPS_PREFIX)/usr/include/cudnn.h))
GPU_SRC   := $(wildcard src/gpu/*.cu)
ifeq ($(CUDA),0)
  HAVE_CUDA := 0
else ifneq ($(and $(CUDA_HOME),$(CUDNN_H),$(GPU_SRC)),)
  HAVE_CUDA := 1
else ifeq ($(CUDA),1)
  $(error CUDA=1 but nvcc, cudnn.h or src/gpu/*.cu is missing (nvcc: '$(CUDA_HOME)', cudnn.h: '$(CUDNN_H)'))
else
  HAVE_CUDA := 0
endif
ifeq ($(HAVE_CUDA),1)
  CPPFLAGS_ALL += -DTFC_HAVE_CUDA=1 -I$(CUDA_HOME)/include
  LDLIBS_ALL   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart
  NVFLAGS := -O2 -std=c++17 -Iinclude -Isrc -Xcompiler -fPIC,-Wall -MMD -MP \
             -gencode arch=compute_70,code=sm_70 -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
endif

# ---- sources ------------------------------------------------------------------------------
LIB_SRC  := $(sort $(wildcard src/core/*.c src/cpu/*.c src/layers/*.c src/data/*.c src/solver/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(if $(filter 1,$(HAVE_CUDA)),$(GPU_SRC:%.cu=$(BUILD)/%.o))
TOOL_SRC := $(wildcard tools/tfc-*.c)
TOOLS    := $(TOOL_SRC:tools/%.c=$(BIN)/%)
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_LIB := $(wildcard tests/util/*.c)
STATIC   := $(BUILD)/libtfc.a
SHARED   := $(BUILD)/libtfc.so

.SECONDARY:
.PHONY: all lib tools tests test test-gpu bench bench-gpu bench-data fuzz fuzz-run run deps clean features
all: features lib tools

features:
	@echo "tfc $(VERSION) [$(CONFIG)]: CPU ✓ (OpenBLAS$(if $(BLAS_LIB), openmp,)), CUDA $(if $(filter 1,$(HAVE_CUDA)),✓,✗), cuDNN $(if $(filter 1,$(HAVE_CUDA)),✓,✗)"

lib: $(STATIC) $(SHARED)
tools: $(TOOLS)
tests: $(TESTS)

$(STATIC): $(LIB_OBJ)
	@echo "  AR    $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@echo "  LD    $@"
	$(Q)$(CC) -shared -o $@ $^ $(LDFLAGS_ALL) $(LDLIBS_ALL)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC  $<"
	$(Q)$(NVCC) $(NVFLAGS) $(filter -D% -I%,$(CPPFLAGS_ALL)) -c $< -o $@

$(BIN)/tfc-%: tools/tfc-%.c $(STATIC)
	@mkdir -p $(BIN)
	@echo "  LINK  $@"
	$(Q)mkdir -p $(BUILD)/tools
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -MF $(BUILD)/tools/$(notdir $@).d $< $(STATIC) -o $@ \
	    $(LDFLAGS_ALL) $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/%.c $(TEST_LIB) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) -Itests/util $(CFLAGS_ALL) $< $(TEST_LIB) $(STATIC) -o $@ \
	    $(LDFLAGS_ALL) $(LDLIBS_ALL) -lcunit

# The default suite: every tests/test_*.c is one CUnit program; run_tests.sh runs them all
# and prints one closing line "tests: N passed, N failed".
test: all tests
	$(Q)OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} tests/run_tests.sh $(BUILD)/tests $(BIN)

# ---- fuzzing: clang libFuzzer with ASan+UBSan, objects built separately -------------------
FUZZ_CC    ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_FLAGS := -g -O1 -Wno-pass-failed -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC   := $(wildcard fuzz/fuzz_*.c)
FUZZERS    := $(FUZZ_SRC:fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_LIBOBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_SECONDS ?= 60

fuzz: $(FUZZERS)
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC $<"
	$(Q)$(FUZZ_CC) $(CPPFLAGS_ALL) -std=c11 -fopenmp $(FUZZ_FLAGS) -c $< -o $@
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_LIBOBJ)
	@echo "  FUZZLD $@"
	$(Q)$(FUZZ_CC) $(CPPFLAGS_ALL) -std=c11 -fopenmp -g -O1 -fsanitize=fuzzer,address,undefined \
	    $< $(FUZZ_LIBOBJ) -o $@ $(LDLIBS_ALL)
# Runs every fuzzer for FUZZ_SECONDS on its seed corpus (fuzz/corpus/<name>/).
fuzz-run: fuzz
	$(Q)for f in $(FUZZERS); do n=$${f##*/fuzz_}; mkdir -p build/fuzz/corpus/$$n; \
	    echo "== $$n ($(FUZZ_SECONDS) s)"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
	        $$(test -f fuzz/$$n.dict && echo -dict=fuzz/$$n.dict) \
	        build/fuzz/corpus/$$n $$(test -d fuzz/corpus/$$n && echo fuzz/corpus/$$n) \
	        2>&1 | tail -n 3 || exit 1; done

deps:
	$(Q)tools/install-deps.sh

clean:
	rm -rf build $(BIN)

# Per-area rules (benchmarks, data tools) live in mk/*.mk so areas can grow independently.
-include $(wildcard mk/*.mk)

-include $(shell find build -name '*.d' 2>/dev/null)
