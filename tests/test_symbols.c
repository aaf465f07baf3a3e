/* The library's surface (include/tfc.h): libtfc.a and libtfc.so export only tfc_ / TFC_ names,
 * read with nm; and a program that includes only "tfc.h" compiles and links with the flags
 * the header documents. The libraries are found beside this program's build directory
 * (build/<config>/tests/test_symbols -> build/<config>/libtfc.{a,so}). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char build_dir[PATH_MAX];

static const char *build(void)
{
    if (!build_dir[0]) {
        ssize_t n = readlink("/proc/self/exe", build_dir, sizeof build_dir - 1);
        CU_ASSERT_FATAL(n > 0);
        build_dir[n] = '\0';
        for (int up = 0; up < 2; up++) *strrchr(build_dir, '/') = '\0';  /* drop tests/NAME */
    }
    return build_dir;
}

/* Every defined external symbol of `lib` (nm -g --defined-only, -D for a shared library)
 * that lacks the prefix; returns how many symbols nm listed in all. */
static int check_exports(const char *lib, int dynamic)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "nm -g %s --defined-only '%s/%s' 2>/dev/null", dynamic ? "-D" : "",
             build(), lib);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char line[512], addr[64], type[8], name[400];
    int total = 0, bad = 0;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "%63s %7s %399s", addr, type, name) != 3) continue;
        total++;
        /* The linker's own markers in a shared object are not ours to name. */
        static const char *const linker[] = {"_init", "_fini", "__bss_start", "_edata", "_end"};
        /* DEBUG=1 (ASan) adds one marker per global, named after it: __odr_asan.tfc_x. */
        const char *own = !strncmp(name, "__odr_asan.", 11) ? name + 11 : name;
        int ok = !strncmp(own, "tfc_", 4) || !strncmp(own, "TFC_", 4);
        for (size_t i = 0; !ok && i < sizeof linker / sizeof *linker; i++)
            ok = !strcmp(name, linker[i]);
        if (!ok) {
            if (bad++ < 20) fprintf(stderr, "  %s exports %s (%s)\n", lib, name, type);
        }
    }
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT_EQUAL(bad, 0);
    return total;
}

static void test_static_exports_prefixed(void)
{
    CU_ASSERT(check_exports("libtfc.a", 0) > 200);  /* nm read the archive at all */
}

static void test_shared_exports_prefixed(void)
{
    CU_ASSERT(check_exports("libtfc.so", 1) > 200);
}

/* A program that includes only tfc.h, compiled with -Iinclude -Isrc and linked against the
 * static library, loads a zoo model and reports its layer count. */
static void test_header_alone(void)
{
    const char *src = tfc_test_write("app.c",
        "#include \"tfc.h\"\n"
        "#include <stdio.h>\n"
        "int main(int argc, char **argv)\n"
        "{\n"
        "    tfc_error err = {0};\n"
        "    tfc_model *m = tfc_model_load(argc > 1 ? argv[1] : \"\", &err);\n"
        "    if (!m) { fprintf(stderr, \"%s\\n\", err.msg); return 1; }\n"
        "    printf(\"%d\\n\", tfc_model_nlayers(m));\n"
        "    tfc_model_free(m);\n"
        "    return 0;\n"
        "}\n", -1);
    char cmd[4 * PATH_MAX];
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    /* The link line of include/tfc.h; a CUDA build needs the CUDA libraries too, which
     * TFC_TEST_LDLIBS (set by the Makefile) supplies. */
    const char *libs = getenv("TFC_TEST_LDLIBS") ? getenv("TFC_TEST_LDLIBS")
                       : "-lopenblas -lyaml -ljansson -lpng -ljpeg -lz -lm -fopenmp";
    snprintf(cmd, sizeof cmd,
             "%s -std=c11 -Wall -Wextra -Werror -Iinclude -Isrc %s -o %s %s/libtfc.a %s",
             cc, src, tfc_test_path("app"), build(), libs);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s model_zoo/fashion_mlp/model.yaml", tfc_test_path("app"));
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int layers = -1;
    CU_ASSERT_EQUAL(fscanf(p, "%d", &layers), 1);
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT(layers > 0);
}

/* The solver and the tools reach devices through the op table (core/backend.h) and
 * src/device/ only (issue 43): none of their files includes a backend's header (cpu/cpu.h,
 * gpu/gpu.h) or calls a backend's own functions (tfc_cpu_..., tfc_gpu_...). Run from the
 * source tree (make test's working directory). */
static void test_device_boundary(void)
{
    char *out = NULL, cwd[PATH_MAX], cmd[PATH_MAX + 512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(cmd, sizeof cmd, "cd '%s' && grep -nE '#include \"(cpu/cpu|gpu/gpu)\\.h\"|"
             "\\btfc_(cpu|gpu)_[a-z_]+\\(' src/solver/*.c src/solver/*.h tools/*.c",
             cwd);
    int rc = tfc_test_sh(cmd, &out);
    CU_ASSERT_EQUAL(rc, 1); /* grep found nothing */
    if (rc != 1) printf("\nthe solver or a tool reaches a backend directly:\n%s\n", out);
    free(out);
}

TFC_TEST_MAIN("symbols", {"device_boundary", test_device_boundary}, {"static_exports_prefixed", test_static_exports_prefixed},
              {"shared_exports_prefixed", test_shared_exports_prefixed},
              {"header_alone", test_header_alone})
