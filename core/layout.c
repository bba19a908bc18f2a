#include "layout.h"

#include <glib.h>
#include <string.h>

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
