/* tfc-grid's results (grid.h): each point's summary.json read back, DIR/results.csv sorted by
 * the ranking metric (and printed aligned), and DIR/report.html: the table, sortable, and
 * every trial's test curve with the scheduler's pauses marked. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"

int grid_read_summary(grid *g, grid_point *p)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/summary.json", p->dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return 0;
    }
    const char *st = json_string_value(json_object_get(root, "status"));
    snprintf(p->status, sizeof p->status, "%s", st ? st : "unknown");
    const char *h = json_string_value(json_object_get(root, "config_hash"));
    snprintf(p->run_hash, sizeof p->run_hash, "%s", h ? h : "");
    json_t *best = json_object_get(root, "best");
    const char *metric = json_string_value(json_object_get(best, "metric"));
    if (metric && !g->metric[0]) {
        snprintf(g->metric, sizeof g->metric, "%s", metric);
        g->lower_is_better = tfc_metric_name_lower_is_better(metric);
    }
    p->have_best = 0;
    if (metric && !strcmp(metric, g->metric) && json_is_number(json_object_get(best, "value"))) {
        p->have_best = 1;
        p->best_value = json_number_value(json_object_get(best, "value"));
        p->best_iter = (long long)json_integer_value(json_object_get(best, "iteration"));
    }
    json_t *test = json_object_get(json_object_get(root, "final"), "test");
    json_t *fv = json_object_get(test, g->metric[0] ? g->metric : "loss");
    p->have_final = json_is_number(fv);
    p->final_value = p->have_final ? json_number_value(fv) : 0;
    p->wall = json_number_value(json_object_get(root, "wall_seconds"));
    p->iterations = (long long)json_integer_value(json_object_get(root, "iterations"));
    /* A scheduler's pause tests the point (its rung result, final.test) without counting it
     * in the run's best: it counts here, so a paused point ranks by what it reached. */
    int better = !p->have_best || (g->lower_is_better ? p->final_value < p->best_value
                                                      : p->final_value > p->best_value);
    if (!strcmp(p->status, "paused") && p->have_final && better) {
        p->have_best = 1;
        p->best_value = p->final_value;
        p->best_iter = p->iterations;
    }
    json_decref(root);
    return 1;
}

double grid_summary_metric(const grid_point *p, const char *metric)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/summary.json", p->dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *v = json_object_get(json_object_get(json_object_get(root, "final"), "test"), metric);
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    json_decref(root);
    return x;
}


/* ---- results ----------------------------------------------------------------------------- */

static const grid *sort_grid;

static int by_metric(const void *a, const void *b)
{
    const grid_point *p = *(grid_point *const *)a, *q = *(grid_point *const *)b;
    if (p->have_best != q->have_best) return q->have_best - p->have_best;
    if (p->have_best && p->best_value != q->best_value) {
        int lt = p->best_value < q->best_value;
        return sort_grid->lower_is_better ? (lt ? -1 : 1) : (lt ? 1 : -1);
    }
    return p < q ? -1 : p > q;
}

/* A CSV field: quoted when it holds a comma, quote or newline. */
static void csv_field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

#define NFIXED 7

/* The row's cells (strings into `cells`, each of `width` bytes). */
static void row_cells(const grid *g, const grid_point *p, char (*cells)[4600])
{
    int c = 0;
    for (int i = 0; i < g->nkeys; i++) snprintf(cells[c++], 4600, "%s", p->vals[i]);
    if (p->have_final) snprintf(cells[c++], 4600, "%.6g", p->final_value);
    else cells[c++][0] = 0;
    if (p->have_best) {
        snprintf(cells[c++], 4600, "%.6g", p->best_value);
        snprintf(cells[c++], 4600, "%lld", p->best_iter);
    } else {
        cells[c++][0] = 0;
        cells[c++][0] = 0;
    }
    snprintf(cells[c++], 4600, "%lld", p->iterations);
    snprintf(cells[c++], 4600, "%.1f", p->wall);
    snprintf(cells[c++], 4600, "%s", p->status[0] ? p->status : "pending");
    if (g->sched) { /* where the scheduler left it, and why */
        snprintf(cells[c++], 4600, "%lld", p->iterations);
        grid_sched_reason(g, p, cells[c++], 4600);
    }
    snprintf(cells[c++], 4600, "%s", p->dir);
}

int grid_write_results(grid *g, const char *dir)
{
    grid_point **order = grid_xcalloc((size_t)g->npoints, sizeof *order);
    for (int i = 0; i < g->npoints; i++) {
        grid_read_summary(g, &g->points[i]);
        order[i] = &g->points[i];
    }
    for (int i = 0; i < g->npoints; i++) grid_read_summary(g, &g->points[i]); /* metric now known */
    sort_grid = g;
    qsort(order, (size_t)g->npoints, sizeof *order, by_metric);
    const char *m = g->metric[0] ? g->metric : "loss";
    int ncols = g->nkeys + NFIXED + (g->sched ? 2 : 0);
    char (*head)[4600] = grid_xcalloc((size_t)ncols, sizeof *head);
    for (int i = 0; i < g->nkeys; i++) snprintf(head[i], 4600, "%s", g->keys[i].name);
    snprintf(head[g->nkeys], 4600, "test_%s", m);
    snprintf(head[g->nkeys + 1], 4600, "best_%s", m);
    snprintf(head[g->nkeys + 2], 4600, "best_iter");
    snprintf(head[g->nkeys + 3], 4600, "iterations");
    snprintf(head[g->nkeys + 4], 4600, "wall_seconds");
    snprintf(head[g->nkeys + 5], 4600, "status");
    int last = g->nkeys + 6;
    if (g->sched) {
        snprintf(head[last++], 4600, "stop_iter");
        snprintf(head[last++], 4600, "reason");
    }
    snprintf(head[last], 4600, "run_dir");

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    char (*cells)[4600] = grid_xcalloc((size_t)ncols, sizeof *cells);
    int *width = grid_xcalloc((size_t)ncols, sizeof *width);
    for (int c = 0; c < ncols; c++) {
        csv_field(f, head[c], c == ncols - 1);
        width[c] = (int)strlen(head[c]);
    }
    for (int i = 0; i < g->npoints; i++) {
        row_cells(g, order[i], cells);
        for (int c = 0; c < ncols; c++) {
            csv_field(f, cells[c], c == ncols - 1);
            if ((int)strlen(cells[c]) > width[c]) width[c] = (int)strlen(cells[c]);
        }
    }
    fclose(f);
    char path[4200];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    const void *chunks[1] = {text};
    tfc_error err;
    tfc_error_clear(&err);
    int ok = tfc_file_write_atomic(path, chunks, &len, 1, &err) == TFC_OK;
    if (!ok) fprintf(stderr, "tfc-grid: %s", err.text);
    free(text);

    printf("\n");
    for (int c = 0; c < ncols; c++)
        printf("%-*s%s", c == ncols - 1 ? 0 : width[c], head[c], c == ncols - 1 ? "\n" : "  ");
    for (int i = 0; i < g->npoints; i++) {
        row_cells(g, order[i], cells);
        for (int c = 0; c < ncols; c++)
            printf("%-*s%s", c == ncols - 1 ? 0 : width[c], cells[c], c == ncols - 1 ? "\n" : "  ");
    }
    if (ok) printf("results: %s\n", path);
    free(cells);
    free(width);
    free(head);
    free(order);
    return ok;
}

/* ---- report.html ---------------------------------------------------------------------------- */

/* Splits one CSV line (results.csv's quoting: fields with , " or newline quoted, "" inside)
 * into at most `max` fields written into `buf`; returns the count. */
static int csv_split(const char *line, char **fields, int max, char *buf, size_t size)
{
    int n = 0;
    size_t o = 0;
    const char *c = line;
    while (n < max && o < size) {
        fields[n++] = buf + o;
        int quoted = *c == '"';
        if (quoted) c++;
        for (; *c && o + 1 < size; c++) {
            if (quoted && *c == '"' && c[1] == '"') buf[o++] = *c++;
            else if (quoted && *c == '"') quoted = 0;
            else if (!quoted && (*c == ',' || *c == '\n')) break;
            else buf[o++] = *c;
        }
        buf[o++] = 0;
        if (*c != ',') break;
        c++;
    }
    return n;
}

/* Text into HTML (&, <, >, " escaped). */
static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

typedef struct curve {
    char name[256];
    double *x, *y;
    int n;
    double mark_x[TFC_ASHA_MAX_RUNGS + 1]; /* asha: where it was paused (rungs it reported) */
    int nmarks;
} curve;

/* The test rows of RUN/log.csv: (iteration, `metric`). */
static void read_curve(const char *run_dir, const char *metric, curve *c)
{
    char path[4600], line[4096];
    snprintf(path, sizeof path, "%s/log.csv", run_dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    int col = -1, cap = 0;
    char *fields[64], buf[4096];
    if (fgets(line, sizeof line, f)) {
        int n = csv_split(line, fields, 64, buf, sizeof buf);
        for (int i = 0; i < n; i++)
            if (!strcmp(fields[i], metric)) col = i;
    }
    while (col >= 0 && fgets(line, sizeof line, f)) {
        int n = csv_split(line, fields, 64, buf, sizeof buf);
        if (n <= col || strcmp(fields[1], "test")) continue;
        if (c->n == cap) {
            cap = cap ? 2 * cap : 16;
            c->x = realloc(c->x, (size_t)cap * sizeof *c->x);
            c->y = realloc(c->y, (size_t)cap * sizeof *c->y);
            if (!c->x || !c->y) break;
        }
        c->x[c->n] = atof(fields[0]);
        c->y[c->n++] = atof(fields[col]);
    }
    fclose(f);
}

/* DIR/report.html: one static file (no server, no external script, style or font): the
 * results table of DIR/results.csv, sortable by clicking a column, and an SVG of every trial's
 * test metric against iterations from its log.csv, with the rungs where successive halving
 * paused it (DIR/asha.csv) marked. Returns 0, 2 when DIR holds no results.csv (not a sweep's
 * folder: the user named the wrong one), or 1 when report.html cannot be written. */
int grid_write_report(const char *dir)
{
    char path[4200], line[16384], buf[16384];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "tfc-grid: %s: %s (not a sweep's folder?)\n", path, strerror(errno));
        return 2;
    }
    char *head[64], hbuf[4096];
    int ncols = fgets(line, sizeof line, in) ? csv_split(line, head, 64, hbuf, sizeof hbuf) : 0;
    int run_col = -1, metric_col = -1;
    for (int i = 0; i < ncols; i++) {
        if (!strcmp(head[i], "run_dir")) run_col = i;
        if (!strncmp(head[i], "test_", 5) && metric_col < 0) metric_col = i;
    }
    const char *metric = metric_col >= 0 ? head[metric_col] + 5 : "loss";
    char **rows = NULL;
    int nrows = 0;
    while (fgets(line, sizeof line, in)) {
        rows = realloc(rows, (size_t)(nrows + 1) * sizeof *rows);
        if (!rows) break;
        rows[nrows++] = grid_xstrdup(line);
    }
    fclose(in);
    curve *cv = grid_xcalloc((size_t)(nrows ? nrows : 1), sizeof *cv);
    double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
    for (int r = 0; r < nrows; r++) {
        char *fields[64];
        int n = csv_split(rows[r], fields, 64, buf, sizeof buf);
        if (run_col < 0 || n <= run_col) continue;
        const char *base = strrchr(fields[run_col], '/');
        snprintf(cv[r].name, sizeof cv[r].name, "%s", base ? base + 1 : fields[run_col]);
        read_curve(fields[run_col], metric, &cv[r]);
        for (int i = 0; i < cv[r].n; i++) {
            if (cv[r].x[i] > xmax) xmax = cv[r].x[i];
            if (cv[r].y[i] < ymin) ymin = cv[r].y[i];
            if (cv[r].y[i] > ymax) ymax = cv[r].y[i];
        }
    }
    /* the scheduler's pauses: result lines, at the stage's iteration (the header lists them) */
    snprintf(path, sizeof path, "%s/asha.csv", dir);
    FILE *log = fopen(path, "r");
    for (int i = 0; !log && i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s.csv", dir, i ? "hyperband" : "median");
        log = fopen(path, "r");
    }
    double rung_iter[TFC_ASHA_MAX_RUNGS + 1];
    int nr = 0;
    while (log && fgets(line, sizeof line, log)) {
        const char *rg = strstr(line, " rungs=");
        if (!rg) rg = strstr(line, " steps=");
        if (!rg) rg = strstr(line, " stages="), rg = rg ? rg + 1 : NULL; /* one longer */
        if (line[0] == '#' && rg) {
            for (const char *c = rg + 7; *c && *c != ' ' && nr <= TFC_ASHA_MAX_RUNGS;) {
                rung_iter[nr++] = atof(c);
                c += strcspn(c, ": ");
                if (*c == ':') c++;
            }
            continue;
        }
        char name[256];
        int k;
        double v;
        if (sscanf(line, "result,%255[^,],%d,%lf", name, &k, &v) != 3 || k < 0 || k >= nr)
            continue;
        for (int r = 0; r < nrows; r++) {
            curve *c = &cv[r];
            if (strcmp(c->name, name) || c->nmarks > TFC_ASHA_MAX_RUNGS) continue;
            c->mark_x[c->nmarks++] = rung_iter[k];
            int have = 0; /* the rung's test, when log.csv has no row there (a pause logs none) */
            for (int i = 0; i < c->n; i++) have |= c->x[i] == rung_iter[k];
            if (have || !isfinite(v)) continue;
            double *x = realloc(c->x, (size_t)(c->n + 1) * sizeof *x);
            double *y = x ? realloc(c->y, (size_t)(c->n + 1) * sizeof *y) : NULL;
            if (x) c->x = x;
            if (!y) continue;
            c->y = y;
            int at = c->n++;
            while (at > 0 && c->x[at - 1] > rung_iter[k]) { /* kept in iteration order */
                c->x[at] = c->x[at - 1];
                c->y[at] = c->y[at - 1];
                at--;
            }
            c->x[at] = rung_iter[k];
            c->y[at] = v;
            if (rung_iter[k] > xmax) xmax = rung_iter[k];
            if (v < ymin) ymin = v;
            if (v > ymax) ymax = v;
        }
    }
    if (log) fclose(log);
    if (!(ymax > ymin)) {
        ymin = isfinite(ymin) ? ymin - 0.5 : 0;
        ymax = ymin + 1;
    }

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 1;
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tfc-grid: ", f);
    html_text(f, dir);
    fputs("</title>\n<style>body{font-family:sans-serif;margin:1em}table{border-collapse:"
          "collapse;font-size:13px}th,td{border:1px solid #ccc;padding:2px 6px}th{cursor:"
          "pointer;background:#eee}svg{border:1px solid #ccc}polyline{fill:none;stroke-width:"
          "1.5}polyline:hover{stroke-width:4}</style></head><body>\n<h1>", f);
    html_text(f, dir);
    const double W = 760, H = 380, L = 60, B = 40, T = 10, R = 10;
    fprintf(f, "</h1>\n<h2>test %s against iterations</h2>\n<svg id=\"curves\" width=\"%g\" "
               "height=\"%g\" viewBox=\"0 0 %g %g\">\n", metric, W, H, W, H);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#000\"/>"
               "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#000\"/>\n",
            L, H - B, W - R, H - B, L, T, L, H - B);
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"12\">0</text><text x=\"%g\" y=\"%g\" "
               "font-size=\"12\" text-anchor=\"end\">%.0f</text>\n",
            L, H - B + 15, W - R, H - B + 15, xmax);
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"12\" text-anchor=\"end\">%.4g</text><text "
               "x=\"%g\" y=\"%g\" font-size=\"12\" text-anchor=\"end\">%.4g</text>\n",
            L - 4, H - B, ymin, L - 4, T + 10, ymax);
    for (int r = 0; r < nrows; r++) {
        if (!cv[r].n) continue;
        double hue = 360.0 * r / (nrows ? nrows : 1);
        fprintf(f, "<polyline stroke=\"hsl(%.0f,70%%,45%%)\" points=\"", hue);
        for (int i = 0; i < cv[r].n; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", L + (W - L - R) * cv[r].x[i] / xmax,
                    H - B - (H - B - T) * (cv[r].y[i] - ymin) / (ymax - ymin));
        fputs("\"><title>", f);
        html_text(f, cv[r].name);
        fputs("</title></polyline>\n", f);
        for (int m = 0; m < cv[r].nmarks; m++) /* a pause: the curve's point at the rung */
            for (int i = 0; i < cv[r].n; i++)
                if (cv[r].x[i] == cv[r].mark_x[m])
                    fprintf(f, "<circle class=\"rung\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"hsl("
                               "%.0f,70%%,45%%)\"/>\n",
                            L + (W - L - R) * cv[r].x[i] / xmax,
                            H - B - (H - B - T) * (cv[r].y[i] - ymin) / (ymax - ymin), hue);
    }
    fputs("</svg>\n<p>Circles: a stage where the scheduler paused the trial (asha.csv, "
          "hyperband.csv or median.csv); hover a curve for its trial.</p>\n", f);
    fprintf(f, "<h2>%d trials</h2>\n<p>Click a column to sort.</p>\n<table id=\"results\">"
               "<thead><tr>", nrows);
    for (int i = 0; i < ncols; i++) {
        fputs("<th>", f);
        html_text(f, head[i]);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (int r = 0; r < nrows; r++) {
        char *fields[64];
        int n = csv_split(rows[r], fields, 64, buf, sizeof buf);
        fputs("<tr>", f);
        for (int i = 0; i < n; i++) {
            fputs("<td>", f);
            html_text(f, fields[i]);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    fputs("<script>\n"
          "document.querySelectorAll('#results th').forEach(function(th, col) {\n"
          "  th.onclick = function() {\n"
          "    var body = document.querySelector('#results tbody');\n"
          "    var rows = Array.prototype.slice.call(body.rows);\n"
          "    var up = th.dataset.up !== '1'; th.dataset.up = up ? '1' : '0';\n"
          "    rows.sort(function(a, b) {\n"
          "      var x = a.cells[col].textContent, y = b.cells[col].textContent;\n"
          "      var nx = parseFloat(x), ny = parseFloat(y);\n"
          "      var d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);\n"
          "      return up ? d : -d; });\n"
          "    rows.forEach(function(r) { body.appendChild(r); }); }; });\n"
          "</script>\n</body></html>\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/report.html", dir);
    const void *chunks[1] = {text};
    tfc_error err;
    tfc_error_clear(&err);
    int ok = tfc_file_write_atomic(path, chunks, &len, 1, &err) == TFC_OK;
    if (!ok) fprintf(stderr, "tfc-grid: %s", err.text);
    else printf("report: %s\n", path);
    free(text);
    for (int r = 0; r < nrows; r++) {
        free(rows[r]);
        free(cv[r].x);
        free(cv[r].y);
    }
    free(rows);
    free(cv);
    return ok ? 0 : 1;
}

