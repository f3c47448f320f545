package recipe

import (
	"strconv"
	"strings"
)

// MaxOverlayLayers is the most layers an overlay root takes: the names
// "0:1:...:87" fill fsconfig's 255 bytes. An image with more uses its
// hard-linked root.
const MaxOverlayLayers = 88

// OverlayLowerdir is the lowerdir option's value for n layers named by
// their index, top first.
func OverlayLowerdir(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return strings.Join(names, ":")
}
