#!/bin/sh
# Rebuilds the compressed package lists of the fixture roots from the
# handwritten stanzas beside this script (*.stanzas) and, for realistic
# size, stanzas of packages gpuenv does not keep, cut from a real list of
# Debian 12's archive (every Nth stanza, relevant names left out). Run it
# from anywhere on a Debian 12 machine whose lists apt fetched:
#
#   sh testdata/apt/make-lists.sh [bookworm-main-list] [bookworm-security-main-list]
#
# lz4 lists are written as apt writes them: 64 KiB blocks, each linked to
# the one before (lz4 -BD -B4).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lists=/var/lib/apt/lists
main=${1:-$lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4}
security=${2:-$lists/deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages.lz4}
relevant='^(cuda|cudnn|datacenter-gpu-manager|dkms|dnf-automatic|firmware-nvidia|glx-alternative-nvidia|kernel-core|kernel-devel|kmod-nvidia|libaccinj64|libcublas|libcuda|libcudart|libcudnn|libcufft|libcufile|libcuinj64|libcupti|libcurand|libcusolver|libcusparse|libnccl|libnpp|libnvblas|libnvidia|libnvinfer|libnvjitlink|libnvjpeg|libnvrtc|libnvtoolsext|libnvvm|libtorch|linux-headers|linux-image|linux-modules-nvidia|linux-objects-nvidia|linux-signatures-nvidia|nsight|nvidia|python3-jax|python3-tensorflow|python3-torch|tensorrt|unattended-upgrades|xserver-xorg-video-nvidia)'

# filler LIST EVERY OFFSET COUNT: COUNT irrelevant stanzas of LIST, every
# EVERYth from the OFFSETth.
filler() {
	lz4 -dc "$1" | awk -v every="$2" -v offset="$3" -v count="$4" -v relevant="$relevant" '
		BEGIN { RS = ""; ORS = "\n\n"; n = 0 }
		{ split($0, f, "\n"); name = substr(f[1], 10) }
		name ~ relevant { next }
		(NR - offset) % every == 0 && n < count { print; n++ }'
}

d=$here/debian12
{ cat "$d/bookworm_main.stanzas"; filler "$main" 25 0 2500; } | lz4 -q -BD -B4 -f - "$d/bookworm_main.Packages.lz4"
{ filler "$main" 97 3 150; cat "$d/bookworm_contrib.stanzas"; } | lz4 -q -BD -B4 -f - "$d/bookworm_contrib.Packages.lz4"
{ filler "$main" 89 7 250; cat "$d/bookworm_non-free.stanzas"; } | lz4 -q -BD -B4 -f - "$d/bookworm_non-free.Packages.lz4"
{ cat "$d/bookworm-security_main.stanzas"; filler "$security" 6 1 400; } | gzip -9n > "$d/bookworm-security_main.Packages.gz"
gzip -9n < "$d/bookworm-security_non-free.stanzas" > "$d/bookworm-security_non-free.Packages.gz"
xz -9 < "$d/bookworm-backports_non-free.stanzas" > "$d/bookworm-backports_non-free.Packages.xz"

# One list in every compression apt writes, for the decoders.
c=$here/compressed
mkdir -p "$c"
src=$d/bookworm-security_non-free.stanzas
lz4 -q -BD -B4 -f "$src" "$c/Packages.lz4"
lz4 -q -BI -B7 -BX --content-size -f "$src" "$c/Packages-independent.lz4"
gzip -9n < "$src" > "$c/Packages.gz"
xz -9 < "$src" > "$c/Packages.xz"
zstd -q -19 -f "$src" -o "$c/Packages.zst"
bzip2 -9 < "$src" > "$c/Packages.bz2"

# dnf's primary metadata, as dnf 4 caches it: gzip, and zstd as newer
# repositories publish it.
r=$here/rhel9
zstd -q -19 -f "$r/cuda-rhel9-primary.xml" -o "$r/cuda-rhel9-primary.xml.zst"
gzip -9n < "$r/epel-primary.xml" > "$r/epel-primary.xml.gz"
