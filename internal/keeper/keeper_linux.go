// The workspace keeper process runs this file: its state, and the start
// that makes its scratch directory and the initial workspace.

package keeper

import (
	"fmt"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/wire"
	"github.com/fumehood/sandbox/internal/workspace"
	"golang.org/x/sys/unix"
)

// keeper is the keeper process's state. Layers are numbered tmpfs mounts
// at L<n> in the scratch directory, each holding u (the files) and w (the
// overlay's work directory); the workspace is mounted at ws.
type keeper struct {
	cfg     wire.KeeperConfig
	layered bool
	next    int
	lowers  []int         // the stack under the upper layer, top first
	upper   int           // the layer that takes changes (flat: the workspace)
	snaps   map[int][]int // snapshot -> its stack, top first; 0 is the initial content
	snapID  int
	marks   map[int]mark // the workspace as each run in flight found it
	markID  int
	// lowerStale says lw does not show the stack under the upper layer
	// yet (mountLowerView).
	lowerStale bool
}

// start makes the scratch directory and the initial workspace.
func start(cfg wire.KeeperConfig) (*keeper, error) {
	k := &keeper{cfg: cfg, snaps: map[int][]int{}, marks: map[int]mark{}, upper: -1}
	// The initial content is read before the scratch tmpfs hides /tmp.
	var from *workspace.Root
	if cfg.From != "" {
		var err error
		if from, err = workspace.Open(cfg.From, -1, -1); err != nil {
			return nil, err
		}
		defer from.Close()
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=1m"); err != nil {
		return nil, fmt.Errorf("mount scratch tmpfs: %w", err)
	}
	if err := unix.Chdir("/tmp"); err != nil {
		return nil, err
	}
	for _, d := range []string{"ws", "empty", "lw"} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	k.layered = !cfg.Flat && k.canOverlay()
	var base []int
	if from != nil {
		l, err := k.newLayer(cfg.Size, recipe.TmpfsInodes(cfg.Size))
		if err != nil {
			return nil, err
		}
		if err := k.copyInto(l, from); err != nil {
			return nil, fmt.Errorf("copy SessionWorkspace.From %s: %w", cfg.From, err)
		}
		base = []int{l}
	}
	k.snaps[0] = base
	if err := k.restore(0); err != nil {
		return nil, err
	}
	return k, nil
}
