package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy returns the CPU time all processes of the machine have used so far (the non-idle
// fields of /proc/stat's cpu line, in USER_HZ = 100 ticks per second); ok is false when it cannot
// be read.
func machineBusy() (busy time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for i, f := range fields[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), true
}

// fsType names the filesystem that holds dir (statfs(2)'s magic number), "" when unknown: the
// embedded store's fsync costs what this filesystem's does (nothing on tmpfs).
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	switch uint32(st.Type) {
	case 0xef53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683e:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x2fc12fc1:
		return "zfs"
	}
	return fmt.Sprintf("filesystem 0x%x", uint32(st.Type))
}

// processTreeCPU returns the CPU time used so far by process pid and its children (each one's
// utime and stime in /proc/<pid>/stat, and pid's cutime and cstime: the children it has reaped),
// in USER_HZ = 100 ticks per second: PostgreSQL's postmaster and its backends. 0 when pid is 0
// or gone.
func processTreeCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(pid)
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command (which may hold spaces), from the 3rd: state, ppid, …, then
		// utime, stime, cutime and cstime (the 14th to 17th: f[11] to f[14]).
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 15 {
			continue
		}
		var times []string
		switch {
		case e.Name() == self:
			times = f[11:15] // its own, and its reaped children's
		case f[1] == self:
			times = f[11:13]
		}
		for _, v := range times {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * (time.Second / 100)
}
