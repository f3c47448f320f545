package sandbox

// Root is the sandbox's root filesystem, Options.Root: RootDir or *Image.
// Only those implement it. Nil means the host's /usr, /bin, /sbin and /lib*
// bound read-only.
type Root interface{ isRoot() }

// RootDir is a host directory (an extracted image, a debootstrap tree)
// whose top-level entries replace the host's /usr, /bin, /lib* binds. It is
// bound read-only; /proc, /dev, /tmp, /workspace and /etc are provided by
// the sandbox as usual. It must be an absolute path to a directory: New
// refuses the empty RootDir (a nil Root is the host's directories).
type RootDir string

// An *Image as the root: its filesystem is the root, as a RootDir is, and
// its config supplies the default environment and working directory. It is
// pulled at the first Run and kept in use (safe from a prune of the store)
// until Close.
func (*Image) isRoot() {}

func (RootDir) isRoot() {}
