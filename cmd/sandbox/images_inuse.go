package main

import (
	"context"

	"github.com/fumehood/sandbox/internal/image"
)

// inUseColumn is the IN USE column of "sandbox images": "yes" while a
// sandbox (of any process) holds the image's root, which "sandbox images
// prune" then keeps.
func inUseColumn(st *image.Store, img image.Image) (string, error) {
	used, err := st.InUse(context.Background(), img)
	if err != nil {
		return "", err
	}
	if used {
		return "yes", nil
	}
	return "no", nil
}
