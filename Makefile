# tfc — one Makefile for the library, the tools, the tests, the fuzzers and the benchmarks.
#
#   make              library (static + shared) and tools into build/<config>/ and bin/
#   make test         the CUnit suites (no GPU needed)
#   make fuzz         libFuzzer targets (clang, ASan+UBSan); FUZZ_SECONDS=600 make fuzz-run
#   make bench        CPU benchmarks against PyTorch; bench-load, bench-peers (docs/cpu.md)
#   make run          installs dependencies and data, trains configs/fashion_cnn.yaml
#   make deps         installs the Debian packages (needs root or sudo)
#
# Options: DEBUG=1 (ASan+UBSan, -O1), V=1 (echo commands), CUDA=0|1 (default: auto), MPI=0|1, NCCL=0|1, DNNL=0|1,
# DEPS_PREFIX=DIR (libraries unpacked from .debs under DIR, e.g. on a bare GPU machine),
# CUDA_HOME=DIR, CUDNN_PREFIX=DIR, NCCL_PREFIX=DIR, NVCCFLAGS=... (see the CUDA section and docs/gpu.md).

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

# ---- MPI: data-parallel ranks (src/comm), built whenever mpicc is found, unless MPI=0 ------
MPI ?= auto
ifneq ($(MPI),0)
  MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
endif
ifneq ($(strip $(MPI_LIBS)),)
  HAVE_MPI := 1
  CPPFLAGS_ALL += -DTFC_HAVE_MPI=1 $(MPI_CFLAGS)
  LDLIBS_ALL   += $(MPI_LIBS) $(patsubst -L%,-Wl$(comma)-rpath$(comma)%,$(filter -L%,$(MPI_LIBS)))
else ifeq ($(MPI),1)
  $(error MPI=1, but mpicc is missing (apt install libopenmpi-dev))
else
  HAVE_MPI := 0
endif

# ---- oneDNN: the CPU backend's convolutions (src/cpu/cpu_dnnl.c), built whenever Debian's
# libdnnl-dev is found, unless DNNL=0; without it they run as im2col + OpenBLAS GEMM ---------
DNNL ?= auto
# cpu_dnnl.c is written to oneDNN 2.x's C API (Debian 12's 2.6; 3.x renamed the calls).
ifneq ($(DNNL),0)
  DNNL_H := $(firstword $(wildcard $(if $(DEPS_PREFIX),$(DEPS_PREFIX)/usr/include/oneapi/dnnl/dnnl.h) \
                                   /usr/include/oneapi/dnnl/dnnl.h /usr/local/include/oneapi/dnnl/dnnl.h))
  ifneq ($(DNNL_H),)
    ifeq ($(shell grep -c 'define DNNL_VERSION_MAJOR 2$$' $(dir $(DNNL_H))dnnl_version.h 2>/dev/null),0)
      DNNL_H :=
      DNNL_NOTE := (oneDNN found, but not 2.x)
    endif
  endif
endif
ifneq ($(DNNL_H),)
  HAVE_DNNL := 1
  CPPFLAGS_ALL += -DTFC_HAVE_DNNL=1
  LDLIBS_ALL   += -ldnnl
else ifeq ($(DNNL),1)
  $(error DNNL=1, but oneDNN 2.x's header is missing (apt install libdnnl-dev) $(DNNL_NOTE))
else
  HAVE_DNNL := 0
endif

LDLIBS_CPU   := $(LDLIBS_ALL)

# ---- CUDA: built whenever nvcc and cuDNN are found, unless CUDA=0 --------------------------
# CUDA_HOME: the toolkit (default: nvcc's parent). CUDNN_PREFIX=DIR: cuDNN outside the toolkit
# and the system paths, with DIR/include/cudnn.h and DIR/lib/libcudnn.so* (e.g. a pip wheel:
# CUDNN_PREFIX=$$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))')).
# Kernels for sm_70 (sm_75 where nvcc has dropped Volta, as CUDA 13 has), sm_80 and sm_90,
# plus compute_90 PTX that newer GPUs compile at load time (see docs/gpu.md).
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDNN_PREFIX ?=
NCCL_PREFIX ?=
ifneq ($(CUDNN_PREFIX),)
  CUDNN_H       := $(wildcard $(CUDNN_PREFIX)/include/cudnn.h)
  CUDNN_LIBDIRS := $(CUDNN_PREFIX)/lib $(CUDNN_PREFIX)/lib64
else
  CUDNN_H       := $(firstword $(wildcard $(if $(CUDA_HOME),$(CUDA_HOME)/include/cudnn.h) \
                                   $(if $(DEPS_PREFIX),$(DEPS_PREFIX)/usr/include/cudnn.h \
                                       $(DEPS_PREFIX)/usr/include/$(MULTIARCH)/cudnn.h) \
                                   /usr/include/cudnn.h /usr/include/$(MULTIARCH)/cudnn.h \
                                   /usr/local/include/cudnn.h))
  CUDNN_LIBDIRS := $(if $(CUDA_HOME),$(CUDA_HOME)/lib64 $(CUDA_HOME)/lib) \
                   $(if $(DEPS_PREFIX),$(DEPS_PREFIX)/usr/lib/$(MULTIARCH)) \
                   /usr/lib/$(MULTIARCH) /usr/local/lib
endif
# linked by path, so a wheel's unversioned-link-less libcudnn.so.9 works too
CUDNN_SO  := $(firstword $(wildcard $(foreach d,$(CUDNN_LIBDIRS),$(d)/libcudnn.so $(d)/libcudnn.so.[0-9]*)))
GPU_SRC   := $(filter-out src/gpu/gpu_nccl.cu,$(wildcard src/gpu/*.cu))
ifeq ($(CUDA),0)
  HAVE_CUDA := 0
else ifneq ($(and $(CUDA_HOME),$(CUDNN_H),$(CUDNN_SO),$(GPU_SRC)),)
  HAVE_CUDA := 1
else ifneq ($(filter 1,$(CUDA))$(CUDNN_PREFIX),)
  $(error CUDA=1 or CUDNN_PREFIX given, but nvcc, cudnn.h, libcudnn or src/gpu/*.cu is missing (CUDA toolkit: '$(CUDA_HOME)', cudnn.h: '$(CUDNN_H)', libcudnn: '$(CUDNN_SO)'; set CUDA_HOME or CUDNN_PREFIX))
else
  HAVE_CUDA := 0
endif
ifeq ($(HAVE_CUDA),1)
  CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart.so $(CUDA_HOME)/lib/libcudart.so))
  CUDA_LIBDIR := $(dir $(if $(CUDA_LIBDIR),$(CUDA_LIBDIR),$(CUDA_HOME)/lib64/))
  CPPFLAGS_ALL += -DTFC_HAVE_CUDA=1 -I$(dir $(CUDNN_H)) -I$(CUDA_HOME)/include
  LDLIBS_ALL   += $(CUDNN_SO) -Wl,-rpath,$(abspath $(dir $(CUDNN_SO))) -L$(CUDA_LIBDIR) \
                  -Wl,-rpath,$(abspath $(CUDA_LIBDIR)) -lcublas -lcudart -lstdc++
  NVCC     := $(if $(wildcard $(CUDA_HOME)/bin/nvcc),$(CUDA_HOME)/bin/nvcc,$(NVCC))
  # NCCL (the `nccl` engine of data-parallel GPU runs, src/gpu/gpu_nccl.cu): the toolkit's or
  # Debian's (libnccl-dev), unless NCCL=0; NCCL=1 makes its absence an error.
  NCCL ?= auto
  ifneq ($(NCCL),0)
    # NCCL_PREFIX=DIR: NCCL outside the toolkit, DIR/include/nccl.h and DIR/lib/libnccl.so*
    # (e.g. a pip wheel's, linked by path as cuDNN's is)
    NCCL_H  := $(firstword $(wildcard $(if $(NCCL_PREFIX),$(NCCL_PREFIX)/include/nccl.h) \
                   $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
    NCCL_SO := $(firstword $(wildcard $(if $(NCCL_PREFIX),$(NCCL_PREFIX)/lib/libnccl.so \
                   $(NCCL_PREFIX)/lib/libnccl.so.[0-9]*) \
                   $(CUDA_LIBDIR)libnccl.so /usr/lib/$(shell gcc -dumpmachine)/libnccl.so))
  endif
  ifneq ($(and $(NCCL_H),$(NCCL_SO)),)
    HAVE_NCCL := 1
    GPU_SRC   += src/gpu/gpu_nccl.cu
    CPPFLAGS_ALL += -DTFC_HAVE_NCCL=1 -I$(dir $(NCCL_H))
    LDLIBS_ALL   += $(NCCL_SO) -Wl,-rpath,$(abspath $(dir $(NCCL_SO)))
  else ifeq ($(NCCL),1)
    $(error NCCL=1, but nccl.h or libnccl.so is missing (CUDA toolkit: '$(CUDA_HOME)'; apt install libnccl-dev))
  endif
  NVCC_ARCHS := $(shell $(NVCC) --list-gpu-arch 2>/dev/null)
  GPU_OLDEST := $(if $(filter compute_70,$(NVCC_ARCHS)),70,$(if $(NVCC_ARCHS),75,70))
  # GPU_GENCODE=...: the targets (default: the oldest this nvcc knows, sm_80, sm_90 + PTX);
  # e.g. GPU_GENCODE='-gencode arch=compute_90,code=sm_90' for a quicker build for one GPU.
  GPU_GENCODE ?= -gencode arch=compute_$(GPU_OLDEST),code=sm_$(GPU_OLDEST) \
                 -gencode arch=compute_80,code=sm_80 \
                 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  # --fmad=false: our kernels round a * b + c twice, as the CPU does (docs/gpu.md);
  # -fno-exceptions: no C++ exception handling, whose personality reference
  # (DW.ref.__gxx_personality_v0) would be an exported symbol without our tfc_ prefix
  NVFLAGS := -O2 -std=c++17 -lineinfo --fmad=false -Iinclude -Isrc \
             -Xcompiler -fPIC,-fno-exceptions,-Wall,-Wextra,-Wno-unused-parameter,-Wno-format-truncation,-Werror \
             --Werror all-warnings -Wno-deprecated-gpu-targets \
             $(GPU_GENCODE) $(NVCCFLAGS)
endif

# ---- sources ------------------------------------------------------------------------------
LIB_SRC  := $(sort $(wildcard src/core/*.c src/layers/*.c src/cpu/*.c src/graph/*.c src/device/*.c src/comm/*.c src/data/*.c src/solver/*.c src/api/*.c))
# The GPU objects come with device/device.c, their only caller: a partial build
# (LIB_SRC="...") without it compiles no CUDA.
GPU_OBJ  := $(if $(and $(filter 1,$(HAVE_CUDA)),$(filter src/device/device.c,$(LIB_SRC))),$(GPU_SRC:%.cu=$(BUILD)/%.o))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(GPU_OBJ)
TOOL_SRC := $(wildcard tools/tfc-*.c)
TOOLS    := $(TOOL_SRC:tools/%.c=$(BIN)/%)
# The command-line parser every tool links (tools/cli.h); not part of libtfc.
TOOL_OBJ := $(BUILD)/tools/cli.o
# tfc-grid's parts (tools/grid.h), linked into tfc-grid alone.
GRID_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/grid_*.c))
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_LIB := $(wildcard tests/util/*.c)
STATIC   := $(BUILD)/libtfc.a
SHARED   := $(BUILD)/libtfc.so

.SECONDARY:
.PHONY: all lib tools tests test test-gpu test-gpu-memcheck bench bench-load bench-peers bench-dist bench-gpu bench-data fuzz fuzz-run run deps clean features
all: features lib tools

features:
	@echo "tfc $(VERSION) [$(CONFIG)]: CPU ✓ (OpenBLAS$(if $(BLAS_LIB), openmp,)$(if $(filter 1,$(HAVE_DNNL)), + oneDNN,)), CUDA $(if $(filter 1,$(HAVE_CUDA)),✓ (sm_$(GPU_OLDEST) sm_80 sm_90 + PTX),✗), cuDNN $(if $(filter 1,$(HAVE_CUDA)),✓ ($(notdir $(CUDNN_SO))),✗), MPI $(if $(filter 1,$(HAVE_MPI)),✓,✗), NCCL $(if $(filter 1,$(HAVE_NCCL)),✓,✗)"

lib: $(STATIC) $(SHARED)
tools: $(TOOLS)
tests: $(TESTS)

$(STATIC): $(LIB_OBJ)
	@echo "  AR    $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@echo "  LD    $@"
	$(Q)$(CC) -shared -Wl,-soname,libtfc.so.$(SOVERSION) -o $@ $^ $(LDFLAGS_ALL) $(LDLIBS_ALL)

# The flags every object is compiled with, among them the features found (MPI, oneDNN, CUDA,
# NCCL): $(BUILD)/.flags changes (only) when they do, and every object depends on it, so that
# a build begun before tools/install-deps.sh compiles again with what it installed rather
# than keeping objects made without (a comm layer without MPI, whose tfc-train then refused
# to run under mpirun: "this tfc was built without MPI").
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW := $(strip $(CPPFLAGS_ALL) $(CFLAGS_ALL) $(NVFLAGS))
ifneq ($(strip $(file <$(FLAGS_STAMP))),$(FLAGS_NOW))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(FLAGS_NOW))
endif

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  NVCC  $<"
	$(Q)$(NVCC) $(NVFLAGS) $(filter -D% -I%,$(CPPFLAGS_ALL)) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# bin/ is shared by the release and debug builds: bin/.config names the build its tools
# were linked from, and changes (only) when the build does, so `make` after `make DEBUG=1`
# relinks them rather than keeping the sanitizer's build (and the reverse).
BIN_CONFIG := $(BIN)/.config
$(shell mkdir -p $(BIN) && (echo '$(CONFIG)' | cmp -s - $(BIN_CONFIG) || echo '$(CONFIG)' > $(BIN_CONFIG)))

$(BIN)/tfc-grid: $(GRID_OBJ)
$(BIN)/tfc-%: tools/tfc-%.c $(TOOL_OBJ) $(STATIC) $(BIN_CONFIG)
	@mkdir -p $(BIN)
	@echo "  LINK  $@"
	$(Q)mkdir -p $(BUILD)/tools
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -MF $(BUILD)/tools/$(notdir $@).d $< $(filter %.o,$^) \
	    $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

# (one gcc call compiles several sources, so its -MMD file keeps only the last one's headers:
# the shared test headers are listed here)
$(BUILD)/tests/%: tests/%.c $(TEST_LIB) $(wildcard tests/util/*.h) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) -Itests/util $(CFLAGS_ALL) $< $(TEST_LIB) $(STATIC) -o $@ \
	    $(LDFLAGS_ALL) $(LDLIBS_ALL) -lcunit

# The default suite: every tests/test_*.c is one CUnit program; run_tests.sh runs them all
# and prints one closing line "tests: N passed, N failed, N skipped".
# test_symbols links a program against libtfc.a with this build's libraries.
test: all tests
	$(Q)OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} CC="$(CC)" \
	    TFC_TEST_LDLIBS="$(PREFIX_INC) $(LDFLAGS_ALL) $(LDLIBS_ALL)" \
	    tests/run_tests.sh $(BUILD)/tests $(BIN)

# ---- fuzzing: clang libFuzzer with ASan+UBSan, objects built separately -------------------
# The fuzzers feed untrusted bytes to the parsers (model YAML and its loader, safetensors, zip,
# IDX, NPY, CSV, images, text, TFRecord), none of which runs a compute kernel. So the fuzz build
# compiles src/ minus the compute code (FUZZ_COMPUTE): src/cpu/, the CPU kernels (cpu_panel.c
# alone took 17 minutes of CPU under clang's instrumentation), and src/device/, which only
# creates the backends; src/gpu/ is CUDA, never built here. The kernels stay checked by
# `make DEBUG=1 test` under gcc's ASan+UBSan. The rest goes into build/fuzz/libtfc.a, from
# which each fuzzer links only the objects its parser reaches, without OpenBLAS or oneDNN: a
# parser that comes to call a kernel fails the fuzz link (undefined tfc_cpu_*,
# tfc_backend_open, cblas_*, dnnl_*). Give that fuzzer a link-time stub of the call (a file
# under fuzz/ added to its link); kernels put back in the list stop make with an error.
FUZZ_CC    ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_FLAGS := -g -O1 -Wno-pass-failed -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC   := $(wildcard fuzz/fuzz_*.c)
FUZZERS    := $(FUZZ_SRC:fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_COMPUTE := src/cpu/% src/device/%
FUZZ_LIBSRC  := $(filter-out $(FUZZ_COMPUTE),$(LIB_SRC))
FUZZ_LIBOBJ  := $(FUZZ_LIBSRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_LIB     := $(FUZZ_BUILD)/libtfc.a
ifneq ($(filter $(FUZZ_COMPUTE),$(FUZZ_LIBSRC)),)
  $(error the fuzz build must not compile compute code: $(filter $(FUZZ_COMPUTE),$(FUZZ_LIBSRC)))
endif
# No GPU backend, so the C objects are built without CUDA or NCCL; no kernel libraries.
FUZZ_CPPFLAGS := $(filter-out -DTFC_HAVE_CUDA=1 -DTFC_HAVE_NCCL=1,$(CPPFLAGS_ALL))
FUZZ_LDLIBS   := $(filter-out -lopenblas -ldnnl,$(LDLIBS_CPU))
FUZZ_SECONDS ?= 60

fuzz: $(FUZZERS)
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC $<"
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) -std=c11 -fopenmp $(FUZZ_FLAGS) -MMD -MP -c $< -o $@
$(FUZZ_LIB): $(FUZZ_LIBOBJ)
	@echo "  AR    $@"
	$(Q)rm -f $@ && ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_LIB)
	@echo "  FUZZLD $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) -std=c11 -fopenmp -g -O1 -fsanitize=fuzzer,address,undefined \
	    $< $(FUZZ_LIB) -o $@ $(FUZZ_LDLIBS) \
	    || { echo "fuzz: $@ reaches code the fuzz build leaves out (Makefile, fuzzing)" >&2; exit 1; }
# Runs every fuzzer for FUZZ_SECONDS on its seed corpus (fuzz/corpus/<name>/); a finding (crash,
# sanitizer report, timeout, leak) stops with its log tail and the input in build/fuzz/, exit 1.
fuzz-run: fuzz
	$(Q)for f in $(FUZZERS); do n=$${f##*/fuzz_}; mkdir -p build/fuzz/corpus/$$n; \
	    echo "== $$n ($(FUZZ_SECONDS) s)"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build/fuzz/ \
	        $$(test -f fuzz/$$n.dict && echo -dict=fuzz/$$n.dict) \
	        build/fuzz/corpus/$$n $$(test -d fuzz/corpus/$$n && echo fuzz/corpus/$$n) \
	        >build/fuzz/$$n.log 2>&1; rc=$$?; tail -n 3 build/fuzz/$$n.log; \
	    [ $$rc -eq 0 ] || { tail -n 60 build/fuzz/$$n.log; exit 1; }; done

deps:
	$(Q)tools/install-deps.sh

clean:
	rm -rf build $(BIN)

# Per-area rules (benchmarks, data tools) live in mk/*.mk so areas can grow independently.
-include $(wildcard mk/*.mk)

-include $(shell find build -name '*.d' 2>/dev/null)
