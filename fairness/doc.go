// Package fairness keeps FFT's fairness ledger (the equal-share reference
// finish time tau, the weight mu and the compensation rho of the paper's
// Eq. 5) and computes finish-time-fairness metrics, as pure code over
// serialisable state.
//
// # Weighted shares (our extension, off unless jobs carry weights)
//
// The paper's reference gives every active job a dedicated 1/|A(t)| share
// of every GPU model. A Job may carry a weight w_j > 0 (Job.Weight; unset
// means 1); its reference share of every model is then
//
//	s_j = w_j / sum_{k in A(t)} w_k
//
// so the shares still add up to the whole cluster. Job j may run on model i
// a fraction g_i = min(1, s_j * Y_i / d_j) of the time, its fair rate r_j
// fills the fastest models first within one model at a time, and
// tau_j = a_j + W_j / r_j, exactly as in the unweighted case. With every
// weight 1, s_j = 1/|A(t)| and tau, f_j, mu_j and rho_j are bit for bit the
// paper's. tau is recomputed for every job when a job arrives, finishes or
// changes weight. Weights change the reference only: Eq. 5 and the round
// problem are untouched, so a heavier job earns rho faster while it waits
// and is owed more work per round. IsolatedRounds (the Themis FTF
// reference) stays unweighted.
package fairness
