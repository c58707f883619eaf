package host

import (
	"crypto/sha256"
	"encoding/hex"
)

// SHA256 returns the hex sha256 of the bytes of the file at p inside the
// root: what a planner compares with the bytes a file must hold, without
// carrying the bytes in the observation.
func (h *Host) SHA256(p string) (string, error) {
	data, err := h.ReadFile(p)
	if err != nil {
		return "", err
	}
	return SHA256Of(data), nil
}

// SHA256Of returns the hex sha256 of data, as SHA256 writes a file's.
func SHA256Of(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
