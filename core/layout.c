#include "layout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify.h"
#include "resolve.h"

char *ck_job_markers_dir(const char *job)
{
    return g_strconcat(CK_JOBS_DIR "/", job, NULL);
}

char *ck_job_state_dir(const char *job)
{
    return g_strconcat(CK_STATE_DIR "/", job, NULL);
}

char *ck_checkpoint_dir(const char *job, uint64_t n)
{
    return g_strdup_printf(CK_JOBS_DIR "/%s/chk-%" G_GUINT64_FORMAT, job, (guint64)n);
}

bool ck_is_layout_dir(const char *name)
{
    return strcmp(name, CK_JOBS_DIR) == 0 || strcmp(name, CK_STATE_DIR) == 0;
}

int ck_is_checkpoint_dir(int dfd, const char *views_name)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return -e;
    }
    bool empty = true, layout = false;
    struct dirent *de;
    while (!layout && (de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 ||
            (views_name && strcmp(nm, views_name) == 0))
            continue;
        empty = false;
        uint64_t g;
        uint32_t sub;
        size_t l = strlen(nm);
        if (!ck_is_layout_dir(nm) && !ck_parse_generation_name(nm, l, &g) &&
            !ck_parse_subtask_name(nm, l, &sub))
            continue;
        layout = ck_dir_entry_type(dirfd(d), nm, de->d_type) == DT_DIR;
    }
    closedir(d);
    return layout || empty ? 1 : 0;
}
