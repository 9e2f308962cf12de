// Package jobspecs embeds the example jobspecs, so that fftctl dev can submit its sample
// workload wherever it runs.
package jobspecs
