// Package packages observes the host's package database. Every package is
// counted; the GPU-relevant ones (drivers, CUDA, cuDNN, NCCL, container
// toolkit, distribution frameworks, kernels and DKMS) are reported with
// their exact version, state and selection.
//
// On a Debian-family host the database files are read directly
// (/var/lib/dpkg/status and dpkg's pending updates) and no process is
// started: observation must stay fast and must work on a root that is not
// running. Only an RPM-family host, whose database is a binary store, is
// asked through rpm(8), run inside the root.
package packages
