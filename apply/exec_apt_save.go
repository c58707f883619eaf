package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// aptArchives is apt's package cache, where apt-get keeps the package
// files it downloaded.
const aptArchives = "/var/cache/apt/archives"

// debRef is one installed package version to save.
type debRef struct{ name, version string }

// savedFile is a package file kept in a generation: its path inside the
// root, and its SHA-256 and size as saved (recorded in the inverse, and
// checked before the file is installed).
type savedFile struct {
	path   string
	sha256 string
	size   int64
}

// saveDebs keeps the installed version of each package as a .deb in the
// generation, each in a directory of its own, and returns them by name.
// Each comes from the first of these that has it:
//
//   - the package cache, when the copy there has the size and SHA-256 the
//     index gives for that version (ix): apt left it there when it
//     installed the package, and nothing is fetched;
//   - the archive, through one apt-get download for all the versions an
//     index still lists, each checked against the index's checksum, and
//     one download for each package the indexes do not keep (where ix is
//     nil, every one: which versions the archive still has is not known);
//   - dpkg's own records of the installed package, rebuilt with dpkg-deb,
//     for what no archive has (or what could not be fetched).
//
// The package cache is not relied on (images often clean it), only used
// when its file is the archive's.
func (x aptManager) saveDebs(ctx context.Context, ws *Workspace, seq int, pkgs []debRef, ix *facts.PackageIndexes) (map[string]savedFile, error) {
	saved := map[string]savedFile{}
	// listed are the versions an index lists; unknown those the indexes
	// cannot say about (no indexes, or a package they do not keep: only
	// GPU-relevant ones are).
	var listed, unknown, rebuild []debRef
	why := map[string]string{}
	for _, p := range pkgs {
		dir, inRoot, err := debDir(ws, seq, p.name)
		if err != nil {
			return nil, err
		}
		v := pkgdb.IndexedVersion(ix, p.name, p.version)
		if f := x.copyCached(ws, dir, p, v); f != "" {
			// copyCached kept only bytes with the index's digest.
			saved[p.name] = savedFile{path.Join(inRoot, f), v.SHA256, v.Size}
			continue
		}
		switch {
		case v != nil && len(v.Origins) > 0:
			listed = append(listed, p)
		case ix == nil || !pkgdb.Relevant(p.name):
			unknown = append(unknown, p)
		default:
			rebuild = append(rebuild, p)
			why[p.name] = fmt.Sprintf("%s %s is not in the archive any more", p.name, p.version)
		}
	}
	fetch := slices.Concat(listed, unknown)
	if len(fetch) > 0 {
		// apt-get download fetches nothing when it cannot find one of
		// the versions it is given: only the versions an index lists
		// are fetched together, each of the others on its own.
		var batches [][]debRef
		if len(listed) > 0 {
			batches = append(batches, listed)
		}
		for _, p := range unknown {
			batches = append(batches, []debRef{p})
		}
		got, broken := map[string]savedFile{}, map[string]error{}
		for _, b := range batches {
			g, br := x.downloadDebs(ctx, ws, seq, b, ix)
			maps.Copy(got, g)
			maps.Copy(broken, br)
		}
		for _, p := range fetch {
			if f, ok := got[p.name]; ok {
				saved[p.name] = f
				continue
			}
			rebuild = append(rebuild, p)
			switch {
			case broken[p.name] != nil:
				why[p.name] = fmt.Sprintf("the downloaded package file of %s %s is not whole", p.name, p.version)
			case slices.Contains(listed, p):
				why[p.name] = fmt.Sprintf("%s %s could not be downloaded", p.name, p.version)
			default:
				why[p.name] = fmt.Sprintf("%s %s is not in the archive any more", p.name, p.version)
			}
		}
	}
	// In name order, as the packages came: the first that cannot be
	// saved is the one the error names.
	order := map[string]int{}
	for i, p := range pkgs {
		order[p.name] = i
	}
	slices.SortStableFunc(rebuild, func(a, b debRef) int { return order[a.name] - order[b.name] })
	for _, p := range rebuild {
		ws.say("%s: rebuilding it from dpkg's records of the installed package", why[p.name])
		f, err := x.rebuildSaved(ctx, ws, seq, p)
		if err != nil {
			return nil, err
		}
		saved[p.name] = f
	}
	return saved, nil
}

// debDir is the directory of a package's saved file in the generation, on
// this machine and inside the root, created if need be.
func debDir(ws *Workspace, seq int, name string) (dir, inRoot string, err error) {
	sub := path.Join(packagesDir, strconv.Itoa(seq)+"-"+name)
	dir = filepath.Join(ws.Path, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	return dir, path.Join(ws.Dir, sub), nil
}

// archiveName is the name apt gives a package file in its cache and in the
// working directory of apt-get download: name_version_arch.deb, each part
// quoted as apt quotes it ("1:2.3" is "1%3a2.3").
func archiveName(name, version, arch string) string {
	return quoteArchive(name) + "_" + quoteArchive(version) + "_" + quoteArchive(arch) + ".deb"
}

// quoteArchive is apt's QuoteString for a cache file name: '%', ':', '_',
// controls, spaces and bytes above ASCII as %xx.
func quoteArchive(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c == ':' || c == '_' || c <= 0x20 || c >= 0x7f {
			fmt.Fprintf(&b, "%%%02x", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// copyCached copies p's package file from apt's package cache into dir
// when a file there has the size and SHA-256 the index gives for that
// version (v), and returns its name; "" when there is none. The copy is
// checked while it is written: the bytes kept are the bytes hashed.
func (x aptManager) copyCached(ws *Workspace, dir string, p debRef, v *facts.IndexedVersion) string {
	if v == nil || v.SHA256 == "" || v.Size <= 0 {
		return ""
	}
	names := []string{archiveName(p.name, p.version, v.Architecture)}
	if b := path.Base(v.Filename); v.Filename != "" && b != names[0] {
		names = append(names, b)
	}
	for _, n := range names {
		src, err := x.Host.Resolve(path.Join(aptArchives, n))
		if err != nil {
			continue
		}
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != v.Size {
			continue
		}
		dst := filepath.Join(dir, names[0])
		if err := copyChecked(src, dst, v.SHA256); err != nil {
			fmt.Fprintf(ws.Log, "gpuenv: not saving %s from the package cache: %v\n", src, err)
			os.Remove(dst)
			continue
		}
		if err := checkDebFile(dst); err != nil {
			fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
			os.Remove(dst)
			continue
		}
		fmt.Fprintf(ws.Log, "gpuenv: saved %s %s from the package cache (%s, SHA-256 as the index gives it)\n", p.name, p.version, path.Join(aptArchives, n))
		if err := syncDir(dir); err != nil {
			return ""
		}
		return names[0]
	}
	return ""
}

// copyChecked copies src to dst (mode 0600), failing when the bytes'
// SHA-256 is not want.
func copyChecked(src, dst, want string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	sum := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, sum), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return fmt.Errorf("its SHA-256 is %s, the index's %s", got, want)
	}
	return nil
}

// fileSHA256 is the SHA-256 of a file, in hex.
func fileSHA256(p string) (string, error) {
	sum, _, err := fileDigest(p)
	return sum, err
}

// fileDigest is the SHA-256 (in hex) and the size of a file, both of the
// bytes read through one descriptor.
func fileDigest(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	sum := sha256.New()
	n, err := io.Copy(sum, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(sum.Sum(nil)), n, nil
}

// downloadDebs fetches pkgs from the archive with one apt-get download and
// moves each whole file into its package's directory. It returns the
// files saved by name, and why a downloaded file was refused (cut, or not
// the index's).
func (x aptManager) downloadDebs(ctx context.Context, ws *Workspace, seq int, pkgs []debRef, ix *facts.PackageIndexes) (map[string]savedFile, map[string]error) {
	got := map[string]savedFile{}
	broken := map[string]error{}
	sub := path.Join(packagesDir, strconv.Itoa(seq)+"-download")
	tmp := filepath.Join(ws.Path, sub)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
		return got, broken
	}
	defer os.RemoveAll(tmp)
	// apt-get download writes into the working directory; env -C sets it
	// without a shell. As root: apt's sandbox user cannot write into the
	// private generation directory. A version apt cannot find fails the
	// command, and what it fetched before still counts.
	argv := []string{"env", "-C", path.Join(ws.Dir, sub), "apt-get", "-o", "APT::Sandbox::User=root", "download", "--"}
	for _, p := range pkgs {
		argv = append(argv, p.name+"="+p.version)
	}
	_ = x.command(ctx, ws, aptEnv, argv...)
	for _, p := range pkgs {
		m, _ := filepath.Glob(filepath.Join(tmp, quoteArchive(p.name)+"_"+quoteArchive(p.version)+"_*.deb"))
		if len(m) != 1 {
			continue
		}
		f := m[0]
		if err := checkDebFile(f); err != nil {
			broken[p.name] = err
			fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
			continue
		}
		sum, size, err := fileDigest(f)
		if err != nil {
			broken[p.name] = err
			fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
			continue
		}
		if v := pkgdb.IndexedVersion(ix, p.name, p.version); v != nil && v.SHA256 != "" && sum != v.SHA256 {
			broken[p.name] = fmt.Errorf("%s is not the archive's package file: SHA-256 %s, the index's %s", f, sum, v.SHA256)
			fmt.Fprintf(ws.Log, "gpuenv: %v\n", broken[p.name])
			continue
		}
		dir, inRoot, err := debDir(ws, seq, p.name)
		if err == nil {
			err = os.Rename(f, filepath.Join(dir, filepath.Base(f)))
		}
		if err == nil {
			err = syncDir(dir)
		}
		if err != nil {
			fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
			continue
		}
		got[p.name] = savedFile{path.Join(inRoot, filepath.Base(f)), sum, size}
	}
	return got, broken
}

// rebuildSaved rebuilds p's package file from dpkg's records into its
// directory and returns it, once whole.
func (x aptManager) rebuildSaved(ctx context.Context, ws *Workspace, seq int, p debRef) (savedFile, error) {
	dir, inRoot, err := debDir(ws, seq, p.name)
	if err != nil {
		return savedFile{}, err
	}
	if err := x.rebuildDeb(ctx, ws, dir, inRoot, p.name, p.version); err != nil {
		return savedFile{}, fmt.Errorf("cannot save %s %s for rollback (the archive did not give it and rebuilding it failed; see %s): %w", p.name, p.version, ws.Dir+"/"+logName, err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(m) != 1 {
		return savedFile{}, fmt.Errorf("cannot save %s %s for rollback: dpkg-deb wrote no package file", p.name, p.version)
	}
	if err := checkDebFile(m[0]); err != nil {
		os.Remove(m[0])
		return savedFile{}, fmt.Errorf("cannot save %s %s for rollback: %w", p.name, p.version, err)
	}
	sum, size, err := fileDigest(m[0])
	if err != nil {
		return savedFile{}, fmt.Errorf("cannot save %s %s for rollback: %w", p.name, p.version, err)
	}
	return savedFile{path.Join(inRoot, filepath.Base(m[0])), sum, size}, syncDir(dir)
}

// Control files dpkg keeps in /var/lib/dpkg/info for an installed
// package, by the name they have in a package's DEBIAN directory.
var controlFiles = []string{"preinst", "postinst", "prerm", "postrm", "config", "templates", "triggers", "shlibs", "symbols", "conffiles", "md5sums"}

// rebuildDeb makes a package file of an installed package from dpkg's own
// records, as dpkg-repack does but with only dpkg-deb, which every Debian
// system has: the control fields from the status database, the
// maintainer scripts and control files dpkg kept, and the installed files
// its file list names, with their current contents, modes, owners and
// link targets. The tree is built inside the generation (private) and
// removed afterwards.
func (x aptManager) rebuildDeb(ctx context.Context, ws *Workspace, dir, inRoot, name, version string) error {
	para, arch, err := pkgdb.ControlParagraph(x.Host, name, version)
	if err != nil {
		return err
	}
	info := pkgdb.InfoPrefix(x.Host, name, arch)
	list, err := x.Host.ReadFile(info + ".list")
	if err != nil {
		return fmt.Errorf("dpkg's file list of %s: %w", name, err)
	}
	tree := filepath.Join(dir, "tree")
	os.RemoveAll(tree)
	defer os.RemoveAll(tree)
	if err := os.MkdirAll(filepath.Join(tree, "DEBIAN"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tree, "DEBIAN", "control"), para, 0o644); err != nil {
		return err
	}
	for _, c := range controlFiles {
		data, err := x.Host.ReadFile(info + "." + c)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if c == "preinst" || c == "postinst" || c == "prerm" || c == "postrm" || c == "config" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(tree, "DEBIAN", c), data, mode); err != nil {
			return err
		}
	}
	for _, p := range strings.Split(string(list), "\n") {
		if p == "" || p == "/." || !path.IsAbs(p) {
			continue
		}
		if err := x.copyInstalled(p, filepath.Join(tree, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("copying %s of %s: %w", p, name, err)
		}
	}
	return x.command(ctx, ws, nil, "dpkg-deb", "-Zgzip", "--build", "--", path.Join(inRoot, "tree"), inRoot)
}

// copyInstalled copies one installed path (inside the root) to dst on
// this machine as it is: a directory, a file with its bytes, or a
// symbolic link, with mode and owner. A path that is gone is skipped, as
// dpkg-repack does.
func (x aptManager) copyInstalled(p, dst string) error {
	rp, err := x.real(p)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(rp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	// The owner first, then the mode (chown clears setuid and setgid
	// bits), both on the descriptor of what was just made, never by path.
	var owner safefile.Options
	if os.Geteuid() == 0 {
		owner.Owner = &safefile.Owner{UID: int(st.Uid), GID: int(st.Gid)}
	}
	switch {
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		d, err := os.OpenFile(dst, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer d.Close()
		if o := owner.Owner; o != nil {
			if err := d.Chown(o.UID, o.GID); err != nil {
				return err
			}
		}
		return d.Chmod(fileMode(st.Mode & 0o7777))
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(rp)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		return os.Lchown(dst, int(st.Uid), int(st.Gid))
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(rp)
		if err != nil {
			return err
		}
		return safefile.WriteFile(dst, data, fileMode(st.Mode&0o7777), owner)
	}
	// Device nodes and pipes are not package contents dpkg ships.
	return nil
}

// refetchSeq numbers the directories of package files fetched again at
// undo, in the generation running the undo; operations are numbered from
// 1, so these never meet a file saved before an operation.
const refetchSeq = 0

// checkSavedDebs checks, before anything is installed, the saved package
// file of each package undo puts back at a version (pkgs: those that
// differ from dpkg's state). It returns pkgs with each Saved the file to
// install and its SHA256 the file's. A file that is not the one saved is
// fetched again from the archive into the running generation when the
// archive may still have that version, checked as saveDebs checks a
// download (the index's SHA-256); a file nothing can replace is named in
// the error, with every other such file, and nothing is installed. A
// missing file (pruned by history --keep) is left, as before, to apt to
// fetch by name, unless the indexes say the archive lacks that version.
func (x aptManager) checkSavedDebs(ctx context.Context, ws *Workspace, pkgs []PriorPackage, ix *facts.PackageIndexes) ([]PriorPackage, error) {
	out := slices.Clone(pkgs)
	var errs []error
	for i := range out {
		p := &out[i]
		if p.Version == "" || p.Saved == "" {
			continue
		}
		v := pkgdb.IndexedVersion(ix, p.Name, p.Version)
		indexSHA := ""
		if v != nil {
			indexSHA = v.SHA256
		}
		local, err := x.Host.Resolve(p.Saved)
		if err != nil {
			return nil, fmt.Errorf("the package file saved for %s %s, %s: %w", p.Name, p.Version, p.Saved, err)
		}
		vd := judgeSaved("apt", *p, local, indexSHA, checkDebFile)
		if vd.ok && !vd.suspect {
			if vd.note != "" {
				fmt.Fprintf(ws.Log, "gpuenv: using %s: %s\n", p.Saved, vd.note)
			}
			p.SHA256 = vd.sum
			continue
		}
		why := archiveLacks(ix, p.Name, p.Version, v)
		if vd.bad != nil && vd.bad.Missing && why == "" {
			continue
		}
		if why == "" {
			f, reason := x.fetchAgain(ctx, ws, *p, ix)
			if reason == "" {
				if vd.ok {
					ws.say("%s %s: using the archive's copy, %s, in place of %s (%s, and not the index's file)", p.Name, p.Version, f.path, p.Saved, vd.note)
				} else {
					ws.say("%s: fetched it again from the archive as %s (SHA-256 %s)", vd.bad.problem(), f.path, f.sha256)
				}
				p.Saved, p.SHA256 = f.path, f.sha256
				continue
			}
			why = reason
		}
		if vd.ok {
			ws.say("using %s for %s %s: %s (the archive's copy could not be had: %s)", p.Saved, p.Name, p.Version, vd.note, why)
			p.SHA256 = vd.sum
			continue
		}
		vd.bad.Refetch = why
		errs = append(errs, vd.bad)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// archiveLacks says why the archive cannot have name at version (v, from
// the indexes), "" when it may: an index lists it, or the indexes cannot
// say (none read, or a package they do not keep), as saveDebs decides.
func archiveLacks(ix *facts.PackageIndexes, name, version string, v *facts.IndexedVersion) string {
	if v != nil && len(v.Origins) > 0 || ix == nil || !pkgdb.Relevant(name) {
		return ""
	}
	return fmt.Sprintf("no package index lists %s %s any more", name, version)
}

// fetchAgain downloads p's version from the archive into the running
// generation, checked as saveDebs checks a download; it returns why not
// when it cannot.
func (x aptManager) fetchAgain(ctx context.Context, ws *Workspace, p PriorPackage, ix *facts.PackageIndexes) (savedFile, string) {
	got, broken := x.downloadDebs(ctx, ws, refetchSeq, []debRef{{p.Name, p.Version}}, ix)
	if f, ok := got[p.Name]; ok {
		return f, ""
	}
	if err := broken[p.Name]; err != nil {
		return savedFile{}, "the archive's copy was refused: " + err.Error()
	}
	return savedFile{}, fmt.Sprintf("apt-get download %s=%s gave no file (see %s)", p.Name, p.Version, ws.Dir+"/"+logName)
}
