package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pgpkey"
)

// keyFetchTimeout bounds fetching a repository's key.
const keyFetchTimeout = 2 * time.Minute

// fetchKey fetches a repository's signing key and returns the bytes to
// write: the key in binary (apt) or armored (rpm), only when the file
// holds exactly the pinned key. A mismatch is refused with both
// fingerprints; the operation then writes nothing.
func (x fileExecutor) fetchKey(ctx context.Context, k *plan.KeyFetch) ([]byte, error) {
	u, err := url.Parse(k.URL)
	if err != nil {
		return nil, err
	}
	var data []byte
	switch u.Scheme {
	case "file":
		// A path inside the root, as every path gpuenv reads.
		data, err = x.Host.ReadFileLimit(u.Path, pgpkey.MaxKeyring+1)
	case "http", "https":
		data, err = httpGet(ctx, k.URL)
	default:
		err = fmt.Errorf("gpuenv fetches keys over https, http or from a file, not %q", u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the key %s: %w", k.URL, err)
	}
	binary, err := pgpkey.VerifyKey(data, k.Fingerprint)
	if err != nil {
		var mm *pgpkey.MismatchError
		if errors.As(err, &mm) {
			return nil, fmt.Errorf("refusing the key %s: %w; the repository is not configured and no package manager has read it", k.URL, err)
		}
		return nil, fmt.Errorf("refusing the key %s: %w", k.URL, err)
	}
	if k.Armored {
		return pgpkey.Armor(binary), nil
	}
	return binary, nil
}

// httpGet fetches a small file, bounded in time and size.
func httpGet(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, keyFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the server answered %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, pgpkey.MaxKeyring+1))
}
