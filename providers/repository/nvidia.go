package repository

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// nvidiaStep is the step that adds NVIDIA's CUDA repository for the host
// from gpuenv's table (Desired.NVIDIARepository); nil when none is
// needed or the root has it so.
func nvidiaStep(req *planner.Request) *plan.Step {
	nr := req.Desired.NVIDIARepository
	if nr == nil {
		return nil
	}
	return AddStep(req.Facts.RepositoryFiles, nr.Repository, nvidiarepo.CUDAFiles, blocksText(nr.For))
}

// AddStep is the step that adds one of NVIDIA's repositories from
// gpuenv's table as files: its key, fetched and checked against the
// pinned fingerprint first, then the files that make the package manager
// use it. what names the packages that need it ("CUDA and cuDNN
// packages"). nil when the root has them so.
func AddStep(observed facts.RepositoryFiles, repo nvidiarepo.Repository, names nvidiarepo.Files, what string) *plan.Step {
	keyring, files := repoFiles(repo, names)
	s := fileStep(observed, names.Address, false, files, fmt.Sprintf("NVIDIA's repository %s", repo.URL))
	keyOK := keyringHolds(observed, keyring, repo.Key.Fingerprint)
	if s == nil && keyOK {
		return nil
	}
	if s == nil {
		s = &plan.Step{Address: names.Address, Action: plan.Update}
	}
	var did []string
	if !keyOK {
		key := plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: keyring, Mode: 0o644,
			Key: &plan.KeyFetch{URL: repo.KeyURL(), Fingerprint: repo.Key.Fingerprint, Armored: repo.Family == "rpm"}}}
		// The key goes first: a key that is not the pinned one stops the
		// step before any file makes the package manager read the
		// repository.
		s.Operations = append([]plan.Operation{key}, s.Operations...)
		did = append(did, fmt.Sprintf("fetches its key %s and writes it to %s only if its fingerprint is %s", repo.KeyURL(), keyring, repo.Key.Fingerprint))
	}
	for _, op := range s.Operations[len(did):] {
		if op.File.Remove {
			did = append(did, "removes "+op.File.Path)
		} else {
			did = append(did, "writes "+op.File.Path)
		}
	}
	s.After = map[string]string{"url": repo.URL, "key": repo.KeyURL(), "fingerprint": repo.Key.Fingerprint, "keyring": keyring}
	if s.Action == plan.Update && len(s.Before) == 0 {
		s.Before = map[string]string{"url": repo.URL}
	}
	manager := "apt"
	if repo.Family == "rpm" {
		manager = "dnf"
	}
	s.Reason = plan.Sentence([]string{
		fmt.Sprintf("%s come from NVIDIA's repository, which no package source of the host and no repository block of the spec configures", what),
		fmt.Sprintf("the plan adds the one gpuenv's table names for the host, %s (%s)", repo.URL, repo.Source),
		fmt.Sprintf("it %s, before %s reads the repository", strings.Join(did, ", then "), manager),
		"rollback removes the key and the files again",
	})
	s.ReasonCode = plan.ReasonDependency
	return s
}

// repoFiles are the keyring path and the other files of one of NVIDIA's
// repositories as gpuenv adds it: deb822 sources with Signed-By, and on
// Ubuntu the pin NVIDIA's own pin file sets; a .repo with gpgcheck on RPM
// hosts.
func repoFiles(repo nvidiarepo.Repository, names nvidiarepo.Files) (string, []repoFile) {
	head := fmt.Sprintf("# Written by gpuenv: NVIDIA's repository %s (%s), from gpuenv's table.\n", repo.Name, repo.URL)
	if repo.Family == "rpm" {
		section := strings.TrimPrefix(names.Address, "repository.")
		check := "gpgcheck=1\n"
		if repo.SignedMetadata {
			check = "repo_gpgcheck=1\ngpgcheck=0\n"
		}
		content := head + fmt.Sprintf("[gpuenv-%s]\nname=NVIDIA %s\nbaseurl=%s\nenabled=1\n%sgpgkey=file://%s\n", section, repo.Name, repo.URL, check, names.DnfKey)
		return names.DnfKey, []repoFile{{Path: names.DnfRepo, Content: content, After: plan.RefreshCommand(plan.ManagerDnf)}}
	}
	sources := head + fmt.Sprintf("Types: deb\nURIs: %s\nSuites: /\nSigned-By: %s\n", repo.URL, names.AptKeyring)
	pref := repoFile{Path: names.AptPreferences}
	if repo.PinPriority != 0 {
		// NVIDIA's cuda-<dir>.pin: its packages win over the
		// distribution's at 600, and the distribution's Nsight tools,
		// which clash with NVIDIA's, are never installed.
		host := ""
		if u, err := url.Parse(repo.URL); err == nil {
			host = u.Hostname()
		}
		pref.Content = fmt.Sprintf("# Written by gpuenv: the pin of NVIDIA's cuda-%s.pin for %s.\n"+
			"Package: nsight-compute\nPin: origin *ubuntu.com*\nPin-Priority: -1\n\n"+
			"Package: nsight-systems\nPin: origin *ubuntu.com*\nPin-Priority: -1\n\n"+
			"Package: *\nPin: release l=NVIDIA CUDA\nPin-Priority: %d\n", repo.Dir, host, repo.PinPriority)
	}
	// The pin first: apt-get update after the sources file then reads
	// both.
	return names.AptKeyring, []repoFile{pref, {Path: names.AptSources, Content: sources, After: plan.RefreshCommand(plan.ManagerApt)}}
}

// keyringHolds reports whether the observed keyring at p holds the key
// with the fingerprint and no other.
func keyringHolds(observed facts.RepositoryFiles, p, fingerprint string) bool {
	for _, d := range observed.Keyrings {
		if d.Path == path.Clean(p) {
			return len(d.Fingerprints) > 0 && !slices.ContainsFunc(d.Fingerprints, func(f string) bool { return f != fingerprint })
		}
	}
	return false
}

// blocksText names the blocks whose packages need the repository.
func blocksText(blocks []string) string {
	names := map[string]string{"driver": "the driver", "cuda": "CUDA", "cudnn": "cuDNN"}
	var out []string
	for _, b := range blocks {
		if n, ok := names[b]; ok {
			out = append(out, n)
		} else {
			out = append(out, b)
		}
	}
	switch len(out) {
	case 0:
		return "The spec's packages"
	case 1:
		return out[0] + "'s packages"
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1] + " packages"
}
