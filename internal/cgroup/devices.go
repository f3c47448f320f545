//go:build linux

package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Device is a block device, as major:minor.
type Device struct{ Major, Minor int64 }

func (d Device) String() string {
	return strconv.FormatInt(d.Major, 10) + ":" + strconv.FormatInt(d.Minor, 10)
}

// BlockDevices returns the whole disks under the file systems of paths:
// IO limits apply to a disk's request queue, not to a partition. Paths on
// file systems without a block device (tmpfs, overlay) add none.
func BlockDevices(paths ...string) []Device {
	seen := map[Device]bool{}
	var devs []Device
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			continue
		}
		d := Device{int64(unix.Major(st.Dev)), int64(unix.Minor(st.Dev))}
		sys := filepath.Join("/sys/dev/block", d.String())
		if _, err := os.Stat(sys); err != nil {
			continue // no block device: tmpfs, overlay, ...
		}
		if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
			// The disk is the partition's parent directory in sysfs.
			b, err := os.ReadFile(filepath.Join(sys, "..", "dev"))
			if err != nil {
				continue
			}
			maj, min, _ := strings.Cut(strings.TrimSpace(string(b)), ":")
			d.Major, _ = strconv.ParseInt(maj, 10, 64)
			d.Minor, _ = strconv.ParseInt(min, 10, 64)
		}
		if !seen[d] {
			seen[d] = true
			devs = append(devs, d)
		}
	}
	return devs
}
