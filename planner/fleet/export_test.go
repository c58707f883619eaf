package fleet

// ScanDigest exposes the scan to the package's tests: whether the
// document can take a verdict by digest, the digest, and the hostname.
func ScanDigest(data []byte) (ok bool, d [2]uint64, hostname string) {
	s := scanDocument(data)
	return s.ok, s.digest, s.hostname
}
