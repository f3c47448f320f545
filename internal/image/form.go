package image

import "os"

// layerForm is how a stored layer keeps its whiteouts, recorded in its
// metadata (layerMetadata.Form).
type layerForm string

const (
	// formMarkers keeps whiteouts as the tar has them, as empty files
	// named .wh.NAME and .wh..wh..opq, which only the hard-linked root
	// reads. Layers stored before the overlay form existed record no
	// form, and are in this one.
	formMarkers layerForm = ""
	// formOverlay keeps them as overlayfs reads them: a whiteout is a
	// character device 0/0 at the name it deletes, an opaque directory
	// has the xattr user.overlay.opaque=y. An overlay of such layers is
	// the image's tree, and so is the hard-linked root built from them.
	formOverlay layerForm = "overlay"
	// formNone applies no whiteouts: a tar unpacked whole, not a layer.
	formNone layerForm = "none"
)

// formProbe is the scratch name formFor tries in an empty layer directory.
const formProbe = ".wh-form-probe"

// formFor is the form a layer unpacked into dir, which is empty, can
// have: overlay where this kernel and file system let the store's owner
// make a whiteout device (Linux 5.8) and set a user xattr on a directory
// (not every file system keeps them), markers otherwise.
func formFor(dir *os.Root) layerForm {
	d, err := dir.Open(".")
	if err != nil {
		return formMarkers
	}
	defer d.Close()
	if err := mkWhiteout(d, formProbe); err != nil {
		return formMarkers
	}
	if err := dir.Remove(formProbe); err != nil {
		return formMarkers
	}
	if err := dir.Mkdir(formProbe, 0o700); err != nil {
		return formMarkers
	}
	defer dir.Remove(formProbe)
	f, err := dir.Open(formProbe)
	if err != nil {
		return formMarkers
	}
	defer f.Close()
	if setOpaque(f) != nil {
		return formMarkers
	}
	return formOverlay
}
