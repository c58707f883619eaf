package framework

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// The GPU code a CUDA library carries is in its .nv_fatbin section: one
// container per compiled unit, each holding an entry per target, machine
// code (a cubin, for sm_XY) or PTX (for compute_XY, which the driver
// compiles for any newer GPU). The layout, as cuobjdump reads it
// (NVIDIA's fatbinary.h for the container header; the entry header as
// documented by the reverse-engineered specifications of nvopen-tools'
// fatbin/FORMAT_SPECIFICATION.md and the Kaitai fatbin description):
//
//	container: u32 magic 0xBA55ED50, u16 version, u16 header size (16),
//	           u64 size of the entries that follow
//	entry:     u16 kind (1 PTX, 2 cubin), u16, u32 entry header size,
//	           u64 padded payload size, …, u32 SM number at offset 28
//	           (80 for sm_80, 120 for sm_120); the payload follows the
//	           entry header, the next entry the payload.
const (
	fatbinSection = ".nv_fatbin"
	fatbinMagic   = 0xBA55ED50
	fatbinPTX     = 1
	fatbinCubin   = 2
	entryFixed    = 32
	maxPadding    = 4096
)

// maxContainers bounds the walk: PyTorch's CUDA library holds a few
// thousand containers, each read with a handful of small reads. Every
// container is read, because kernels built for fewer targets (attention
// kernels for sm_80 and later only) can come first; a walk cut short
// gives no answer rather than a partial one, which would call GPUs
// unsupported that a later container serves.
var maxContainers = 1 << 15

// FatbinArchs lists the GPU targets of the ELF object at p ("sm_80",
// "compute_90"), sorted; none when it carries no CUDA code.
func FatbinArchs(h *host.Host, p string) ([]string, error) {
	f, err := h.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, err
	}
	sec := ef.Section(fatbinSection)
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	return fatbinArchs(sec, int64(sec.Size))
}

// fatbinArchs walks the containers of a .nv_fatbin section of size n.
func fatbinArchs(r io.ReaderAt, n int64) ([]string, error) {
	type target struct {
		kind uint16
		sm   uint32
	}
	seen := map[target]bool{}
	var buf [entryFixed]byte
	off, skipped := int64(0), int64(0)
	for c := 0; off+16 <= n; {
		if c == maxContainers {
			return nil, nil
		}
		if _, err := r.ReadAt(buf[:16], off); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(buf[0:]) != fatbinMagic {
			// Containers are 8-byte aligned, and padding may sit between
			// them; anything longer is not a container.
			if skipped += 8; skipped > maxPadding {
				break
			}
			off = (off + 8) &^ 7
			continue
		}
		c++
		skipped = 0
		hdr := int64(binary.LittleEndian.Uint16(buf[6:]))
		size := int64(binary.LittleEndian.Uint64(buf[8:]))
		end := off + hdr + size
		if hdr < 16 || size < 0 || end > n || end <= off {
			return nil, fmt.Errorf("%s: container at %d runs past the section", fatbinSection, off)
		}
		for e := off + hdr; e+entryFixed <= end; {
			if _, err := r.ReadAt(buf[:], e); err != nil {
				return nil, err
			}
			kind := binary.LittleEndian.Uint16(buf[0:])
			ehdr := int64(binary.LittleEndian.Uint32(buf[4:]))
			payload := int64(binary.LittleEndian.Uint64(buf[8:]))
			sm := binary.LittleEndian.Uint32(buf[28:])
			if ehdr < entryFixed || payload < 0 {
				return nil, fmt.Errorf("%s: entry at %d is malformed", fatbinSection, e)
			}
			if (kind == fatbinCubin || kind == fatbinPTX) && sm >= 10 {
				seen[target{kind, sm}] = true
			}
			e += ehdr + payload
		}
		off = end
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		prefix := "sm_"
		if t.kind == fatbinPTX {
			prefix = "compute_"
		}
		out = append(out, prefix+strconv.FormatUint(uint64(t.sm), 10))
	}
	slices.SortFunc(out, compareArch)
	return out, nil
}

// compareArch orders sm_ targets before compute_ ones, each by number.
func compareArch(a, b string) int {
	ka, na := splitArch(a)
	kb, nb := splitArch(b)
	if ka != kb {
		if ka == "sm" {
			return -1
		}
		return 1
	}
	return na - nb
}

func splitArch(a string) (string, int) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == '_' {
			n, _ := strconv.Atoi(a[i+1:])
			return a[:i], n
		}
	}
	return a, 0
}

// torchCUDALibraries hold PyTorch's CUDA kernels: libtorch_cuda.so since
// 1.9's split of libtorch, libtorch_cuda_cu.so in the releases that
// split it further (1.10 to 1.12), libcaffe2_gpu.so before.
var torchCUDALibraries = []string{"libtorch_cuda.so", "libtorch_cuda_cu.so", "libcaffe2_gpu.so"}

// torchArchs fills fw.CUDAArchs from the GPU code torch's CUDA library
// carries: what torch.cuda.get_arch_list() reports, read from the files,
// which holds for any build (a wheel, a distribution's or Nix's package,
// a build from source) where the release table knows only the wheels.
func (o *observer) torchArchs(fw *facts.Framework, dir string) {
	for _, name := range torchCUDALibraries {
		p := path.Join(dir, "torch", "lib", name)
		if _, err := o.h.Lstat(p); err != nil {
			continue
		}
		archs, err := FatbinArchs(o.h, p)
		if err != nil {
			o.warn(p, "reading its GPU code: "+err.Error())
			return
		}
		if len(archs) > 0 {
			fw.CUDAArchs = archs
		}
		return
	}
}
