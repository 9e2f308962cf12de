// Package jobspecs embeds the example jobspecs and the PyTorch job's Python files, so that
// fftctl dev can submit its sample workload wherever it runs.
package jobspecs
