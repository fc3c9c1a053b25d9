/* Pre-screen detection and false-positive rates on the labelled corpus
 * (tests/corpus/prescreen/{malicious,benign}; flagged = a finding of severity high or critical),
 * per language, and scan throughput, with a plain PCRE2-free baseline (memchr over the same bytes).
 * Usage: prescreen_bench [SOURCE_DIR] (default $TOOLCAGE_SOURCE_DIR or "."). */
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
};

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

static int run(const char *root, const char *kind, struct stat3 *st, size_t *bytes, double *secs)
{
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
    size_t bytes = 0;
    double secs = 0;
    static const char *const names[] = {"python", "shell", "javascript"};

    if (!root)
        root = ".";
    if (run(root, "malicious", &mal, &bytes, &secs) < 0 ||
        run(root, "benign", &ben, &bytes, &secs) < 0) {
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
