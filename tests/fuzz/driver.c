/* Runs a libFuzzer target over every file of the corpus directories (or
 * files) given as arguments, so the seeds run under plain `meson test` with
 * any compiler.  Fails when nothing was run: a seed suite that finds no seeds
 * must not pass. */
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path, unsigned *count)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *data = NULL;
    gsize len;
    if (!g_file_get_contents(path, &data, &len, &err)) {
        fprintf(stderr, "%s\n", err->message);
        return -1;
    }
    /* an exact-size copy, so the sanitizers see any read past the input */
    g_autofree uint8_t *copy = g_malloc(len ? len : 1); /* never NULL, as in libFuzzer */
    memcpy(copy, data, len);
    LLVMFuzzerTestOneInput(copy, len);
    (*count)++;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    for (int i = 1; i < argc; i++) {
        if (!g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
            if (run_file(argv[i], &count) < 0)
                return 1;
            continue;
        }
        g_autoptr(GError) err = NULL;
        g_autoptr(GDir) dir = g_dir_open(argv[i], 0, &err);
        if (dir == NULL) {
            fprintf(stderr, "%s\n", err->message);
            return 1;
        }
        const char *name;
        while ((name = g_dir_read_name(dir)) != NULL) {
            g_autofree char *path = g_build_filename(argv[i], name, NULL);
            if (g_file_test(path, G_FILE_TEST_IS_REGULAR) && run_file(path, &count) < 0)
                return 1;
        }
    }
    printf("%u inputs run\n", count);
    return count > 0 ? 0 : 1;
}
