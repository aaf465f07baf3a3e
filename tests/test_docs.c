/* The user docs stay true to the code: every layer type and every argument of its schema
 * appears in docs/layers.md under that layer's heading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "testutil.h"

static void test_layers_documented(void)
{
    char *doc = tfc_test_read("docs/layers.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    for (int i = 0; tfc_layer_registry[i]; i++) {
        const tfc_layer_ops *o = tfc_layer_registry[i];
        char heading[96];
        snprintf(heading, sizeof heading, "\n## %s\n", o->type);
        char *sec = strstr(doc, heading);
        if (!sec) fprintf(stderr, "\ndocs/layers.md: no section for %s\n", o->type);
        CU_ASSERT_PTR_NOT_NULL(sec);
        if (!sec) continue;
        char *end = strstr(sec + 1, "\n## ");
        size_t len = end ? (size_t)(end - sec) : strlen(sec);
        for (const tfc_field *f = o->schema; f->name; f++) {
            char key[96];
            snprintf(key, sizeof key, "| `%s` |", f->name);
            char *hit = strstr(sec, key);
            int ok = hit && (size_t)(hit - sec) < len;
            if (!ok) fprintf(stderr, "\ndocs/layers.md: %s.%s undocumented\n", o->type, f->name);
            CU_ASSERT(ok);
        }
    }
    free(doc);
}

TFC_TEST_MAIN("docs", {"layers_documented", test_layers_documented})
