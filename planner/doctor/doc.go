// Package doctor diagnoses why programs on a host cannot use its NVIDIA
// GPUs. It is a set of checks, pure functions over an observation (and
// the compatibility tables), run in the order a GPU expert works through a
// broken machine: the GPU on the bus, the kernel driver, NVML, device
// nodes, the CUDA toolkit, cuDNN, each framework, the environment, and the
// GPUs' state. Each check reports ok, warning or problem with the facts it
// judged from and the fix: a spec change gpuenv can apply, or a command.
//
// Observe's problems are the checks of stage observe, run over the
// finished observation (ObserveFindings); plan's warnings are those of
// stages observe and plan, run over the host as the plan leaves it
// (Judge), where every rule is declared of one of the two
// (StageOf). The rules
// the checks judge by that other layers need too are exported (rules.go):
// plan's resolution (planner), init (providers/export/capture) and the
// kernel planner call them instead of restating them, so the package is
// the one rule book. It imports nothing of ours but facts, the compatibility tables and
// versions, so any layer may import it.
//
// A check whose subject does not exist yet is skipped rather than failed
// again for the same cause: with no module loaded, the device nodes are
// not also reported missing.
package doctor
