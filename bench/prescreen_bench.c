/* Pre-screen detection and false-positive rates on the labelled corpus
 * (tests/corpus/prescreen/{malicious,benign}; flagged = a finding of severity high or critical),
 * per language and per evasion category (the "evasion: NAME" of a sample's first line), and
 * scan throughput, with a plain PCRE2-free baseline (memchr over the same bytes).
 * Usage: prescreen_bench [SOURCE_DIR] (default $TOOLCAGE_SOURCE_DIR or ".");
 * PRESCREEN_BENCH_VERBOSE=1 lists every missed sample and every false positive. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "policy/prescreen.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct stat3 {
    int files[3], flagged[3];
    int heldout[2], heldout_flagged[2]; /* samples tagged "set: heldout" / "set: heldout2" */
};

/* Evasion categories: files and flagged per category and language. */
#define MAX_CATS 16
struct cats {
    char name[MAX_CATS][32];
    int files[MAX_CATS][3], flagged[MAX_CATS][3];
    int n;
};

static void tally_category(struct cats *c, const char *text, int li, bool fl)
{
    const char *nl = strchr(text, '\n');
    const char *e = strstr(text, "evasion:");
    if (!e || (nl && e > nl))
        return;
    e += 8;
    while (*e == ' ')
        e++;
    size_t n = strcspn(e, " ;,\n");
    if (n == 0 || n >= sizeof(c->name[0]))
        return;
    int k = 0;
    while (k < c->n && !(strlen(c->name[k]) == n && strncmp(c->name[k], e, n) == 0))
        k++;
    if (k == c->n) {
        if (c->n == MAX_CATS)
            return;
        snprintf(c->name[c->n++], sizeof(c->name[0]), "%.*s", (int)n, e);
    }
    c->files[k][li]++;
    c->flagged[k][li] += fl;
}

static const char *lang_of(const char *name, int *idx)
{
    const char *dot = strrchr(name, '.');
    if (dot && strcmp(dot, ".py") == 0)
        return *idx = 0, "python";
    if (dot && strcmp(dot, ".sh") == 0)
        return *idx = 1, "shell";
    if (dot && strcmp(dot, ".js") == 0)
        return *idx = 2, "javascript";
    return NULL;
}

static int run(const char *root, const char *kind, struct stat3 *st, struct cats *cats,
               size_t *bytes, double *secs)
{
    bool verbose = getenv("PRESCREEN_BENCH_VERBOSE") != NULL;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tests/corpus/prescreen/%s", root, kind);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int li;
        const char *lang = lang_of(e->d_name, &li);
        char path[8192], *text = NULL;
        size_t len;
        if (!lang)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (tc_read_file(path, 1 << 20, &text, &len) < 0)
            continue;
        json_t *f = NULL;
        double t0 = now_s();
        for (int rep = 0; rep < 20; rep++) {
            json_decref(f);
            f = NULL;
            if (tc_prescreen(lang, text, len, &f) < 0)
                return -1;
        }
        *secs += now_s() - t0;
        *bytes += 20 * len;
        bool fl = false;
        size_t i;
        json_t *x;
        json_array_foreach(f, i, x)
        {
            const char *s = json_string_value(json_object_get(x, "severity"));
            fl |= strcmp(s, "high") == 0 || strcmp(s, "critical") == 0;
        }
        st->files[li]++;
        st->flagged[li] += fl;
        tally_category(cats, text, li, fl);
        const char *nl = strchr(text, '\n'), *ho = strstr(text, "set: heldout");
        if (ho && (!nl || ho < nl)) {
            int h = ho[12] == '2';
            st->heldout[h]++;
            st->heldout_flagged[h] += fl;
        }
        if (verbose && fl != (strcmp(kind, "malicious") == 0))
            printf("  %s %s\n", fl ? "FALSE POSITIVE" : "MISSED", e->d_name);
        json_decref(f);
        free(text);
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : getenv("TOOLCAGE_SOURCE_DIR");
    struct stat3 mal = {0}, ben = {0};
    struct cats cats = {0}, bcats = {0};
    size_t bytes = 0;
    double secs = 0;
    static const char *const names[] = {"python", "shell", "javascript"};

    if (!root)
        root = ".";
    if (run(root, "malicious", &mal, &cats, &bytes, &secs) < 0 ||
        run(root, "benign", &ben, &bcats, &bytes, &secs) < 0) {
        fprintf(stderr, "prescreen_bench: cannot read the corpus under %s/tests/corpus/prescreen\n",
                root);
        return 2;
    }
    int mt = 0, mf = 0, bt = 0, bf = 0;
    printf("prescreen_bench: labelled corpus (flagged = a high or critical finding)\n");
    printf("  %-11s %10s %10s\n", "language", "detection", "false-pos");
    for (int i = 0; i < 3; i++) {
        printf("  %-11s %5d/%-4d %5d/%-4d\n", names[i], mal.flagged[i], mal.files[i],
               ben.flagged[i], ben.files[i]);
        mt += mal.files[i], mf += mal.flagged[i], bt += ben.files[i], bf += ben.flagged[i];
    }
    if (cats.n) {
        int et = 0, ef = 0, el[3] = {0}, elf[3] = {0};
        printf("  evasion samples (\"evasion:\" in the first line), detected/total:\n");
        printf("  %-15s %8s %8s %8s  %s\n", "category", "python", "shell", "js", "all");
        for (int k = 0; k < cats.n; k++) {
            int t = 0, f = 0;
            printf("  %-15s", cats.name[k]);
            for (int i = 0; i < 3; i++) {
                char cell[16] = "-";
                if (cats.files[k][i])
                    snprintf(cell, sizeof(cell), "%d/%d", cats.flagged[k][i], cats.files[k][i]);
                printf(" %8s", cell);
                t += cats.files[k][i], f += cats.flagged[k][i];
                el[i] += cats.files[k][i], elf[i] += cats.flagged[k][i];
            }
            printf(" %d/%d (%.0f%%)\n", f, t, 100.0 * f / t);
            et += t, ef += f;
        }
        printf("  %-15s", "all evasion");
        for (int i = 0; i < 3; i++) {
            char cell[16] = "-";
            if (el[i])
                snprintf(cell, sizeof(cell), "%d/%d", elf[i], el[i]);
            printf(" %8s", cell);
        }
        printf(" %d/%d (%.1f%%)\n", ef, et, 100.0 * ef / et);
    }
    for (int h = 0; h < 2; h++)
        if (mal.heldout[h] || ben.heldout[h])
            printf(
                "  held-out set %d (\"set: heldout%s\"): detected %d/%d, false positives %d/%d\n",
                h + 1, h ? "2" : "", mal.heldout_flagged[h], mal.heldout[h], ben.heldout_flagged[h],
                ben.heldout[h]);
    double det = mt ? 100.0 * mf / mt : 0, fp = bt ? 100.0 * bf / bt : 100;
    printf("  detection %.1f%% (target >= 90%%), false positives %.1f%% (target <= 5%%)\n", det,
           fp);

    /* throughput on the whole corpus concatenated per language, against a memchr baseline */
    printf("  scan throughput (small files, per-call overhead included): %.1f MB/s\n",
           (double)bytes / 1e6 / secs);
    size_t big = 1 << 20, n = 0;
    char *text = malloc(big + 1);
    const char *line = "for row in rows:\n    total += int(row['amount'])  # sum the "
                       "column\nprint(f'total={total}')\n";
    while (n + strlen(line) < big) {
        memcpy(text + n, line, strlen(line));
        n += strlen(line);
    }
    json_t *f = NULL;
    double t0 = now_s();
    if (tc_prescreen("python", text, n, &f) < 0)
        return 2;
    double t = now_s() - t0;
    json_decref(f);
    t0 = now_s();
    size_t nl = 0;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + n - p))); p++)
        nl++;
    double tb = now_s() - t0;
    printf("  1 MiB python file: %.1f MB/s (baseline memchr %.0f MB/s, %zu lines)\n",
           (double)n / 1e6 / t, (double)n / 1e6 / tb, nl);
    free(text);
    return det >= 90.0 && fp <= 5.0 ? 0 : 1;
}
