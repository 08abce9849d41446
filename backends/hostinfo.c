/*  =========================================================================
    hostinfo - what the host is (see hostinfo.h)
    =========================================================================
*/
#include "hostinfo.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

//  Opens ROOT + PATH for reading, or NULL.
static FILE *
s_open (const char *root, const char *path)
{
    char full [4096];
    snprintf (full, sizeof full, "%s%s", root ? root : "", path);
    return fopen (full, "r");
}

static bool
s_exists (const char *root, const char *path)
{
    char full [4096];
    snprintf (full, sizeof full, "%s%s", root ? root : "", path);
    return access (full, F_OK) == 0;
}

int
hostinfo_os_release (const char *root, const char *key, char *buf,
                     size_t buf_len)
{
    buf [0] = 0;
    FILE *file = s_open (root, "/etc/os-release");
    if (!file)
        file = s_open (root, "/usr/lib/os-release");
    if (!file)
        return -1;
    size_t key_len = strlen (key);
    char line [512];
    int rc = -1;
    while (fgets (line, sizeof (line), file)) {
        if (strncmp (line, key, key_len) || line [key_len] != '=')
            continue;
        char *value = line + key_len + 1;
        value [strcspn (value, "\r\n")] = 0;
        size_t len = strlen (value);
        if (len >= 2 && (value [0] == '"' || value [0] == '\'')
        &&  value [len - 1] == value [0]) {
            value [len - 1] = 0;
            value++;
        }
        size_t keep = strlen (value) < buf_len ? strlen (value) : buf_len - 1;
        memcpy (buf, value, keep);
        buf [keep] = 0;
        rc = 0;
        break;
    }
    fclose (file);
    return rc;
}

int
hostinfo_meminfo (const char *root, long long *total_kib_p,
                  long long *available_kib_p)
{
    FILE *file = s_open (root, "/proc/meminfo");
    if (!file)
        return -1;
    long long total = -1, available = -1;
    char line [256];
    while (fgets (line, sizeof (line), file)) {
        long long value = 0;
        if (sscanf (line, "MemTotal: %lld kB", &value) == 1)
            total = value;
        else
        if (sscanf (line, "MemAvailable: %lld kB", &value) == 1)
            available = value;
    }
    fclose (file);
    if (total < 0 || available < 0)
        return -1;
    *total_kib_p = total;
    *available_kib_p = available;
    return 0;
}

int64_t
hostinfo_boot_time (const char *root)
{
    FILE *file = s_open (root, "/proc/stat");
    if (!file)
        return -1;
    long long boot = -1;
    char line [512];
    while (fgets (line, sizeof (line), file))
        if (sscanf (line, "btime %lld", &boot) == 1)
            break;
    fclose (file);
    return boot >= 0 ? (int64_t) boot : -1;
}

//  True when the file at ROOT + PATH holds NEEDLE (any case, in its
//  first 64 KiB).
static bool
s_file_holds (const char *root, const char *path, const char *const *needles)
{
    FILE *file = s_open (root, path);
    if (!file)
        return false;
    char text [65536];
    size_t size = fread (text, 1, sizeof text - 1, file);
    fclose (file);
    for (size_t index = 0; index < size; index++)
        text [index] = text [index] ? (char) tolower ((unsigned char) text [index])
                                    : '\n';
    text [size] = 0;
    for (; *needles; needles++)
        if (strstr (text, *needles))
            return true;
    return false;
}

const char *
hostinfo_virtual (const char *root)
{
    static const char *const environ_marks [] = {"container=", NULL};
    static const char *const cgroup_marks [] = {"docker", "lxc", "kubepods",
                                                "containerd", NULL};
    if (s_exists (root, "/.dockerenv") || s_exists (root, "/run/.containerenv")
    ||  s_file_holds (root, "/proc/1/environ", environ_marks)
    ||  s_file_holds (root, "/proc/1/cgroup", cgroup_marks))
        return "container";
    static const char *const dmi_marks [] = {
        "kvm", "qemu", "vmware", "virtualbox", "xen", "bochs", "hyper-v",
        "microsoft corporation", "amazon ec2", "google compute", "openstack",
        "parallels", NULL};
    static const char *const cpu_marks [] = {" hypervisor", NULL};
    if (s_file_holds (root, "/sys/class/dmi/id/sys_vendor", dmi_marks)
    ||  s_file_holds (root, "/sys/class/dmi/id/product_name", dmi_marks)
    ||  s_file_holds (root, "/proc/cpuinfo", cpu_marks))
        return "vm";
    return "none";
}

void
hostinfo_os_family (const char *root, char *buf, size_t buf_len)
{
    char like [256];
    if (hostinfo_os_release (root, "ID_LIKE", like, sizeof like) == 0
        && *like) {
        //  The first of a list ("rhel centos fedora")
        like [strcspn (like, " ")] = 0;
        snprintf (buf, buf_len, "%s", like);
        return;
    }
    if (hostinfo_os_release (root, "ID", buf, buf_len) == 0 && *buf)
        return;
    struct utsname names;
    snprintf (buf, buf_len, "%s", uname (&names) == 0 ? names.sysname : "");
    for (char *p = buf; *p; p++)
        *p = (char) tolower ((unsigned char) *p);
}
