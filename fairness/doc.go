// Package fairness keeps FFT's fairness ledger (the equal-share reference
// finish time tau, the weight mu and the compensation rho of the paper's
// Eq. 5) and computes finish-time-fairness metrics, as pure code over
// serialisable state.
package fairness
