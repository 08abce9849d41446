/*  =========================================================================
    hostinfo - what the host is, read from the kernel's own files

    The system backend's queries (os, memory) and the agent's facts read
    the same files the same way: os-release, /proc/meminfo, /proc/stat,
    the DMI strings and the container markers. Every function takes ROOT,
    the directory these paths are read under ("" for the host itself; a
    test gives a directory of its own).

    Threading: reentrant.
    =========================================================================
*/
#ifndef GRID_HOSTINFO_H
#define GRID_HOSTINFO_H

#include <stddef.h>
#include <stdint.h>

//  The value of KEY ("ID", "VERSION_ID", "PRETTY_NAME") in ROOT's
//  os-release (/etc/os-release, else /usr/lib/os-release), unquoted, into
//  BUF. Returns 0, or -1 when there is no such file or key (BUF is "").
int hostinfo_os_release (const char *root, const char *key, char *buf,
                         size_t buf_len);

//  MemTotal and MemAvailable of ROOT's /proc/meminfo, in KiB. Returns 0,
//  or -1 when the file or either line is missing.
int hostinfo_meminfo (const char *root, long long *total_kib_p,
                      long long *available_kib_p);

//  The boot time (Unix seconds) from the btime line of ROOT's /proc/stat,
//  or -1 when unreadable.
int64_t hostinfo_boot_time (const char *root);

//  "container" when ROOT shows the markers of one (/.dockerenv,
//  /run/.containerenv, container= in /proc/1/environ, a docker, lxc or
//  kubepods cgroup), "vm" when its DMI strings or CPU flags name a
//  hypervisor, else "none".
const char *hostinfo_virtual (const char *root);

//  The ID_LIKE family of ROOT's os-release ("debian" for Ubuntu), else its
//  ID, else the kernel's name in lowercase ("linux"), into BUF.
void hostinfo_os_family (const char *root, char *buf, size_t buf_len);

#endif
