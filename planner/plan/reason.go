package plan

// ReasonCode says, as a word a program can switch on, why a step exists,
// as Terraform's ActionReason does; Step.Reason says it in prose. The set
// is closed: a plan that names another code is refused. A step whose prose
// gives several reasons carries the code of the first.
type ReasonCode string

const (
	// ReasonMissing: the resource is not there (a package, toolkit,
	// group, file or repository the spec asks for).
	ReasonMissing ReasonCode = "missing"
	// ReasonIncomplete: the resource is there without some of its parts
	// (the driver's main package without the others).
	ReasonIncomplete ReasonCode = "incomplete"
	// ReasonVersionMismatch: the installed version does not satisfy the
	// spec's.
	ReasonVersionMismatch ReasonCode = "version_mismatch"
	// ReasonVariantMismatch: what is installed is another variant than the
	// spec's: another driver branch, flavour (open or proprietary
	// modules) or source, or another framework build.
	ReasonVariantMismatch ReasonCode = "variant_mismatch"
	// ReasonAbsentRequested: the spec says absent = true.
	ReasonAbsentRequested ReasonCode = "absent_requested"
	// ReasonNotRequested: gpuenv set something up that the spec no longer
	// asks for (blacklist_nouveau = false, a managed file with nothing
	// left to say, the compute-mode boot unit).
	ReasonNotRequested ReasonCode = "not_requested"
	// ReasonHoldDiffers: packages are held and the spec says hold = false,
	// or the other way round.
	ReasonHoldDiffers ReasonCode = "hold_differs"
	// ReasonContentDiffers: a file gpuenv manages (an environment file, a
	// repository's sources or key, the boot unit) differs from the spec.
	ReasonContentDiffers ReasonCode = "content_differs"
	// ReasonMembersDiffer: a group's members differ from the spec's.
	ReasonMembersDiffer ReasonCode = "members_differ"
	// ReasonSettingDiffers: a device or service setting (compute mode,
	// persistence mode) differs from the spec's.
	ReasonSettingDiffers ReasonCode = "setting_differs"
	// ReasonStaleInitramfs: the initramfs predates the module blacklist it
	// must hold.
	ReasonStaleInitramfs ReasonCode = "stale_initramfs"
	// ReasonDependency: another step needs it (the running kernel's
	// headers for DKMS, a repository component the spec's packages are
	// in, the package indexes a version is chosen from).
	ReasonDependency ReasonCode = "dependency"
	// ReasonReplaceRequested: nothing differs, and -replace asked for the
	// resource to be reinstalled at the version it has.
	ReasonReplaceRequested ReasonCode = "replace_requested"
)

// ReasonCodes lists every code, in the order docs/json.md documents them.
var ReasonCodes = []ReasonCode{
	ReasonMissing, ReasonIncomplete, ReasonVersionMismatch, ReasonVariantMismatch,
	ReasonAbsentRequested, ReasonNotRequested, ReasonHoldDiffers, ReasonContentDiffers,
	ReasonMembersDiffer, ReasonSettingDiffers, ReasonStaleInitramfs, ReasonDependency,
	ReasonReplaceRequested,
}

// Valid reports whether c is one of the codes; the empty code, which a
// plan of format 1.0 has, is valid too.
func (c ReasonCode) Valid() bool {
	if c == "" {
		return true
	}
	for _, k := range ReasonCodes {
		if c == k {
			return true
		}
	}
	return false
}
