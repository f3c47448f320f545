package image

import (
	"encoding/json"
	"path/filepath"
)

// overlayLayers are the host directories of the trees of the layers
// diffIDs names (bottom first), top first, when every one is in overlay
// form; nil when one is not. A layer that repeats a layer above it adds
// nothing the one above does not put back, and overlayfs refuses a
// directory given twice, so only the topmost of each is given. A layer
// whose top directory is opaque hides every layer below it, which are
// left out.
func (s *Store) overlayLayers(diffIDs []string) []string {
	var out []string
	seen := map[string]bool{}
	for i := len(diffIDs) - 1; i >= 0; i-- {
		d := diffIDs[i]
		if seen[d] {
			continue
		}
		seen[d] = true
		if s.layerForm(d) != formOverlay {
			return nil
		}
		rel := s.layerRel(d) + "/" + layerFS
		out = append(out, filepath.Join(s.dir, rel))
		f, err := s.root.Open(rel)
		if err != nil {
			return nil
		}
		opaque, err := isOpaque(f)
		f.Close()
		if err != nil {
			return nil
		}
		if opaque {
			break
		}
	}
	return out
}

// layerForm is the form the stored layer diffID keeps its whiteouts in;
// formMarkers when its metadata cannot be read.
func (s *Store) layerForm(diffID string) layerForm {
	b, err := s.root.ReadFile(s.layerRel(diffID) + "/" + layerMeta)
	if err != nil {
		return formMarkers
	}
	var m layerMetadata
	if json.Unmarshal(b, &m) != nil {
		return formMarkers
	}
	return m.Form
}
