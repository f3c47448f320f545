// The workspace keeper process runs this file: snapshots, and restoring
// one (the initial content is snapshot 0), and freeing the layers no
// snapshot holds.

package keeper

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/workspace"
)

// snapshot keeps the workspace as it is now and returns its id.
func (k *keeper) snapshot() (int, error) {
	var stack []int
	if !k.layered {
		l, err := k.newLayer(k.cfg.Size, recipe.TmpfsInodes(k.cfg.Size))
		if err != nil {
			return 0, err
		}
		src, err := k.layerRoot(k.upper)
		if err == nil {
			err = k.copyInto(l, src)
			src.Close()
		}
		if err != nil {
			k.freeLayer(l)
			return 0, fmt.Errorf("copy workspace: %w", err)
		}
		stack = []int{l}
	} else if empty, err := isEmptyDir(fmt.Sprintf("L%d/u", k.upper)); err != nil {
		return 0, err
	} else if empty {
		// Nothing changed since the stack was made: it is the snapshot.
		stack = k.lowers
	} else {
		if len(k.lowers)+1 > maxLayers {
			return 0, unsupported("the workspace has %d snapshot layers, the most it can stack; Restore an earlier snapshot or Reset",
				len(k.lowers))
		}
		// Freeze the upper layer under a fresh one.
		stack = append([]int{k.upper}, k.lowers...)
		up, err := k.freshLayer(stack)
		if err != nil {
			return 0, err
		}
		k.lowers, k.upper = stack, up
		if err := k.mountWorkspace(); err != nil {
			return 0, err
		}
	}
	k.snapID++
	k.snaps[k.snapID] = stack
	return k.snapID, nil
}

// restore makes snapshot id the workspace, under a fresh upper layer.
func (k *keeper) restore(id int) error {
	stack, ok := k.snaps[id]
	if !ok {
		return unsupported("snapshot %d was dropped", id)
	}
	var up int
	var err error
	if k.layered {
		up, err = k.freshLayer(stack)
	} else {
		up, err = k.newLayer(k.cfg.Size, recipe.TmpfsInodes(k.cfg.Size))
		if err == nil && len(stack) > 0 {
			var src *workspace.Root
			if src, err = k.layerRoot(stack[0]); err == nil {
				err = k.copyInto(up, src)
				src.Close()
			}
			if err != nil {
				k.freeLayer(up)
				err = fmt.Errorf("copy snapshot: %w", err)
			}
		}
	}
	if err != nil {
		return err
	}
	if k.layered {
		k.lowers = append([]int(nil), stack...)
	}
	k.upper = up
	if err := k.mountWorkspace(); err != nil {
		return err
	}
	k.collect()
	return nil
}

// collect frees the layers nothing refers to any more.
func (k *keeper) collect() {
	keep := map[int]bool{k.upper: true}
	for _, l := range k.lowers {
		keep[l] = true
	}
	for _, s := range k.snaps {
		for _, l := range s {
			keep[l] = true
		}
	}
	for l := 0; l < k.next; l++ {
		if !keep[l] {
			if _, err := os.Lstat(fmt.Sprintf("L%d", l)); err == nil {
				k.freeLayer(l)
			}
		}
	}
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}
