// Package ui serves the allocator's read-only status page: GPU models and their use, the queue
// and why jobs wait, and SVG plots of utilisation and fairness debt over recent rounds.
package ui
