package jobspecs

import "embed"

// FS holds the example jobspecs (*.nomad.hcl).
//
//go:embed *.nomad.hcl
var FS embed.FS

// PythonFS holds python/: fft_train.py (the driver's contract for Python training scripts)
// and torch_train.py (the PyTorch job of torch-train.nomad.hcl).
//
//go:embed python/fft_train.py python/torch_train.py
var PythonFS embed.FS

// Train is the training job FFT schedules, fft-train.nomad.hcl.
const Train = "fft-train.nomad.hcl"

// Allocator runs fft-allocator itself as a Nomad service job, fft-allocator.nomad.hcl.
const Allocator = "fft-allocator.nomad.hcl"

// TrainDriver is the training job on the nomad-fft task driver, fft-train-driver.nomad.hcl:
// fftctl dev's sample workload.
const TrainDriver = "fft-train-driver.nomad.hcl"
