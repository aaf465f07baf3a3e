/* `make install` into a scratch prefix (SPEC §5c, docs/embedding.md): the files land where the
 * docs say, libtfc.so carries the soname libtfc.so.0, examples/classify.c builds with nothing
 * but `pkg-config --cflags --libs tfc` (and statically with --static) and classifies PNG files
 * as tfc-predict does; the C examples of README and docs/embedding.md compile as shown;
 * DESTDIR stages the same tree; `make uninstall` leaves nothing behind. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfc.h"
#include "testutil.h"

/* The Makefile's configuration of this build: DEBUG=1 builds live in build/debug/. */
static const char *make_config(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return "";
    exe[n] = 0;
    return strstr(exe, "/build/debug/") ? "DEBUG=1" : "";
}

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int exists(const char *prefix, const char *rel)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", prefix, rel);
    return lstat(path, &st) == 0;
}

/* Lines "PATH<TAB>class N<TAB>P" (classify.c) or "PATH<TAB>NAME (N)<TAB>P" (tfc-predict with
 * class names) into classes[] and probabilities[]; returns the count. */
static int read_classes(const char *path, int *cls, double *prob, int cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *label = strchr(line, '\t'), *p = label ? strchr(label + 1, '\t') : NULL;
        if (!p) continue;
        *p = 0;
        char *open = strrchr(label, '(');
        int ok = !strncmp(label, "\tclass ", 7) ? sscanf(label + 7, "%d", &cls[n]) == 1
                 : open && sscanf(open, "(%d)", &cls[n]) == 1;
        if (ok && sscanf(p + 1, "%lf", &prob[n]) == 1) n++;
    }
    fclose(f);
    return n;
}

static void test_install_and_example(void)
{
    const char *bin = tfc_test_bin("tfc-predict");
    if (!bin) return;
    char prefix[PATH_MAX], opts[PATH_MAX + 64];
    snprintf(prefix, sizeof prefix, "%s", tfc_test_path("prefix"));
    snprintf(opts, sizeof opts, "%s PREFIX=%s", make_config(), prefix);
    CU_ASSERT_EQUAL_FATAL(sh("make -s install %s >%s 2>&1", opts, tfc_test_path("install.log")), 0);
    static const char *const files[] = {
        "bin/tfc-train", "bin/tfc-predict", "lib/libtfc.a", "lib/libtfc.so",
        "lib/libtfc.so.0", "lib/libtfc.so." TFC_VERSION, "lib/pkgconfig/tfc.pc", "include/tfc.h",
        "include/tfc/core/error.h", "include/tfc/graph/model.h", "include/tfc/layers/layer.h",
        "share/doc/tfc/SPEC.md", "share/doc/tfc/embedding.md", "share/doc/tfc/examples/classify.c"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if (!exists(prefix, files[i])) fprintf(stderr, "not installed: %s\n", files[i]);
        CU_ASSERT(exists(prefix, files[i]));
    }
    /* internal headers stay out */
    CU_ASSERT(!exists(prefix, "include/tfc/graph/model_internal.h"));
    CU_ASSERT_EQUAL(sh("readelf -d %s/lib/libtfc.so | grep -q 'SONAME.*\\[libtfc.so.0\\]'%s",
                       prefix, ""), 0);

    /* three Fashion-MNIST-sized PNGs */
    unsigned char px[28 * 28];
    tfc_error e;
    tfc_error_clear(&e);
    char images[3 * PATH_MAX] = "";
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 28 * 28; k++) px[k] = (unsigned char)((k * (7 + 5 * i) + 31 * i) % 256);
        char name[32];
        snprintf(name, sizeof name, "img%d.png", i);
        CU_ASSERT_EQUAL_FATAL(tfc_image_write_png(tfc_test_path(name), px, 28, 28, 1, 8, &e), TFC_OK);
        strcat(images, " ");
        strcat(images, tfc_test_path(name));
    }
    const char *model = "model_zoo/fashion_cnn/model.yaml";
    const char *weights = "model_zoo/fashion_cnn/fashion_cnn.safetensors";
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --device cpu --input%s >%s 2>/dev/null",
             bin, model, weights, images, tfc_test_path("want.txt"));
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);

    /* shared: the flags pkg-config gives, the library found at run time through the prefix */
    char env[PATH_MAX + 64];
    snprintf(env, sizeof env, "PKG_CONFIG_PATH=%s/lib/pkgconfig", prefix);
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    snprintf(cmd, sizeof cmd, "%s %s -std=c11 -Wall -Wextra -Werror examples/classify.c -o %s "
             "$(%s pkg-config --cflags --libs tfc) && LD_LIBRARY_PATH=%s/lib %s %s %s%s >%s",
             env, cc, tfc_test_path("classify"), env, prefix, tfc_test_path("classify"), model,
             weights, images, tfc_test_path("shared.txt"));
    CU_ASSERT_EQUAL(system(cmd), 0);
    /* static: libtfc.a and what pkg-config --static adds; no libtfc.so needed to run */
    snprintf(cmd, sizeof cmd, "%s %s -std=c11 examples/classify.c -o %s $(%s pkg-config --cflags tfc) "
             "-Wl,--as-needed %s/lib/libtfc.a $(%s pkg-config --static --libs tfc) && "
             "! ldd %s | grep -q libtfc && %s %s %s%s >%s",
             env, cc, tfc_test_path("classify_static"), env, prefix, env,
             tfc_test_path("classify_static"), tfc_test_path("classify_static"), model, weights,
             images, tfc_test_path("static.txt"));
    CU_ASSERT_EQUAL(system(cmd), 0);
    int wc[3], sc[3], tc[3];
    double wp[3], sp[3], tp[3];
    CU_ASSERT_EQUAL(read_classes(tfc_test_path("want.txt"), wc, wp, 3), 3);
    CU_ASSERT_EQUAL(read_classes(tfc_test_path("shared.txt"), sc, sp, 3), 3);
    CU_ASSERT_EQUAL(read_classes(tfc_test_path("static.txt"), tc, tp, 3), 3);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(sc[i], wc[i]);
        CU_ASSERT_EQUAL(tc[i], wc[i]);
        CU_ASSERT_DOUBLE_EQUAL(sp[i], wp[i], 1e-4);
        CU_ASSERT_DOUBLE_EQUAL(tp[i], wp[i], 1e-4);
    }

    /* README's "Use a trained model from C" and docs/embedding.md's example compile as shown
     * and run */
    static const char *const docs[][2] = {{"README.md", "\n## Use a trained model from C\n"},
                                          {"docs/embedding.md", "\n## The predictor\n"}};
    for (int d = 0; d < 2; d++) {
        char *text = tfc_test_read(docs[d][0], NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        char *sec = strstr(text, docs[d][1]);
        char *code = sec ? strstr(sec, "```c\n") : NULL;
        char *end = code ? strstr(code + 5, "```") : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        *end = 0;
        const char *app = tfc_test_write("doc_app.c", code + 5, -1);
        free(text);
        snprintf(cmd, sizeof cmd, "%s %s -std=c11 -Wall -Wextra -Werror %s -o %s "
                 "$(%s pkg-config --cflags --libs tfc) && LD_LIBRARY_PATH=%s/lib %s >%s",
                 env, cc, app, tfc_test_path("doc_app"), env, prefix, tfc_test_path("doc_app"),
                 tfc_test_path("doc.txt"));
        int rc = system(cmd);
        if (rc) fprintf(stderr, "%s: its C example does not build or run\n", docs[d][0]);
        CU_ASSERT_EQUAL(rc, 0);
        char *out = tfc_test_read(tfc_test_path("doc.txt"), NULL);
        CU_ASSERT_PTR_NOT_NULL(out);
        if (out) CU_ASSERT_PTR_NOT_NULL(strstr(out, "class 0: 0."));
        free(out);
    }

    /* DESTDIR stages the tree under PREFIX; the .pc file names the final prefix */
    char stage[PATH_MAX];
    snprintf(stage, sizeof stage, "%s", tfc_test_path("stage"));
    snprintf(opts, sizeof opts, "%s PREFIX=/opt/tfc DESTDIR=%s", make_config(), stage);
    CU_ASSERT_EQUAL(sh("make -s install %s >%s 2>&1", opts, tfc_test_path("install2.log")), 0);
    CU_ASSERT(exists(stage, "opt/tfc/lib/libtfc.so.0"));
    CU_ASSERT_EQUAL(sh("grep -q '^prefix=/opt/tfc$' %s/opt/tfc/lib/pkgconfig/tfc.pc%s", stage, ""), 0);
    CU_ASSERT_EQUAL(sh("make -s uninstall %s >/dev/null 2>&1%s", opts, ""), 0);
    CU_ASSERT_EQUAL(sh("test -z \"$(find %s -type f -o -type l)\"%s", stage, ""), 0);

    snprintf(opts, sizeof opts, "%s PREFIX=%s", make_config(), prefix);
    CU_ASSERT_EQUAL(sh("make -s uninstall %s >/dev/null 2>&1%s", opts, ""), 0);
    CU_ASSERT_EQUAL(sh("test -z \"$(find %s -type f -o -type l)\"%s", prefix, ""), 0);
}

TFC_TEST_MAIN("install", {"install_and_example", test_install_and_example})
