package image

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// probesDir keeps, per boot of the kernel, what callers found when they
// probed the host with an image's layers: probes/<boot ID>/<key hex>.
const probesDir = "probes"

// bootIDFile names this boot of the kernel: a new random UUID at every
// boot, so that a new kernel, new modules or new sysctls never meet an
// answer found under the old ones.
var bootIDFile = "/proc/sys/kernel/random/boot_id"

// isBootID reports whether s has the form of a boot ID: 36 of lower-case
// hex digits and '-'. A loop, not a regexp: the bounded repeat would be
// compiled at every start of a program that links the image store.
func isBootID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// CachedProbe returns the answer CacheProbe stored for the probe key of
// img's layers (Image.Layers), and whether there is one. An answer holds
// for the boot of the kernel in which it was found and for the very
// directories of the layers it was found with: a layer pruned and pulled
// again, a store copied or a file system mounted over it, is a new
// directory, which has no answer until it is probed. key names the probe
// and whatever else its answer depends on (the sandbox's ids).
func (img *Image) CachedProbe(key string) ([]byte, bool) {
	boot, name, err := img.probeName(key)
	if err != nil {
		return nil, false
	}
	root, err := os.OpenRoot(img.storeDir())
	if err != nil {
		return nil, false
	}
	defer root.Close()
	b, err := root.ReadFile(probesDir + "/" + boot + "/" + name)
	if err != nil {
		return nil, false
	}
	return b, true
}

// CacheProbe stores answer as the probe key's for img's layers, for this
// boot of the kernel, replacing any, and removes the answers of earlier
// boots. Only the store's owner can: for others it fails, and they probe
// again each time.
func (img *Image) CacheProbe(key string, answer []byte) error {
	boot, name, err := img.probeName(key)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(img.storeDir())
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Mkdir(probesDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	dir := probesDir + "/" + boot
	switch err := root.Mkdir(dir, 0o700); {
	case err == nil:
		removeOtherBoots(root, boot)
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	tmp := dir + "/." + name + "." + randomSuffix()
	if err := root.WriteFile(tmp, answer, recordMode); err != nil {
		return err
	}
	if err := root.Rename(tmp, dir+"/"+name); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

// removeOtherBoots removes the answers of boots other than boot, which
// no longer hold.
func removeOtherBoots(root *os.Root, boot string) {
	ents, err := fs.ReadDir(root.FS(), probesDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Name() != boot {
			root.RemoveAll(probesDir + "/" + e.Name())
		}
	}
}

// probeName is this boot's ID and the file name of the probe key's answer
// for img's layers: a hash of key and of each layer's path and identity
// (fileID).
func (img *Image) probeName(key string) (boot, name string, err error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", "", fmt.Errorf("probe cache: %w", err)
	}
	boot = strings.TrimSpace(string(b))
	if !isBootID(boot) {
		return "", "", fmt.Errorf("probe cache: %s holds %q, not a boot ID", bootIDFile, boot)
	}
	if len(img.Layers) == 0 {
		return "", "", errors.New("probe cache: the image has no layers in overlay form")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", key)
	for _, l := range img.Layers {
		id, err := fileID(l)
		if err != nil {
			return "", "", fmt.Errorf("probe cache: %w", err)
		}
		fmt.Fprintf(h, "%q %s\n", l, id)
	}
	return boot, hex.EncodeToString(h.Sum(nil)), nil
}

// storeDir is the directory of the store img is in: its Root is
// roots/<chain ID hex> there.
func (img *Image) storeDir() string { return filepath.Dir(filepath.Dir(img.Root)) }
