package chaos

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A fault's target: a moment drawn by time (targetTiming, as faultTime), or a named phase of
// the leader's round, found by tailing its trace log (allocator/loop "phase start" lines,
// allocator/nomadapi "applying" and "applied" lines) and injecting on the line.
const (
	targetTiming  = "timing"
	targetObserve = "observe" // on "phase start ... phase=1-observe"
	// targetApply fires on the first "applied" line of an apply of two changes or more (so
	// between two registrations); of any apply when fewer than two jobs arrived for it, or
	// after applyPatience.
	targetApply  = "apply"
	targetRecord = "record" // on "phase start ... phase=5-record"
)

var targets = []string{targetTiming, targetObserve, targetApply, targetRecord}

// phaseWait bounds the wait for a target's line; an apply may not come (nothing to change).
const (
	phaseWait     = 8 * time.Second
	applyPatience = 4 * time.Second
)

var (
	phaseLine   = regexp.MustCompile(`phase (start|done|failed): round=\d+ phase=(\S+)`)
	applyingRe  = regexp.MustCompile(`applying: changes=(\d+)`)
	appliedRe   = regexp.MustCompile(`applied: action=`)
	roundDoneRe = regexp.MustCompile(`round done: `)
)

// waitPhase tails the leader's log from now until the target's line, and returns the leader's
// id and "" or, after phaseWait without the line, why not. It calls arrive (if not nil) once
// tailing: it submits jobs and returns how many.
func (st *stack) waitPhase(target string, arrive func() int) (id, missed string) {
	if id = st.leader(); id == "" {
		return "", "no leader"
	}
	f, err := os.Open(st.replicas[id].LogPath)
	if err != nil {
		return id, err.Error()
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return id, err.Error()
	}
	least := 2 // changes an apply needs to fire the apply target
	if arrive != nil && arrive() < 2 {
		least = 1
	}
	var pending []byte
	armed := false
	buf := make([]byte, 64<<10)
	began := time.Now()
	for deadline := began.Add(phaseWait); time.Now().Before(deadline); {
		n, _ := f.Read(buf)
		if n == 0 {
			time.Sleep(500 * time.Microsecond)
			continue
		}
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			line := string(pending[:i])
			pending = pending[i+1:]
			switch target {
			case targetObserve, targetRecord:
				want := map[string]string{targetObserve: "1-observe", targetRecord: "5-record"}[target]
				if m := phaseLine.FindStringSubmatch(line); m != nil && m[1] == "start" && m[2] == want {
					return id, ""
				}
			case targetApply:
				if m := applyingRe.FindStringSubmatch(line); m != nil {
					n, _ := strconv.Atoi(m[1])
					armed = n >= least || (n >= 1 && time.Since(began) > applyPatience)
				} else if armed && appliedRe.MatchString(line) {
					return id, ""
				}
			}
		}
	}
	return id, fmt.Sprintf("no %s line within %s", target, phaseWait)
}

// phaseHit reads where the round of a replica's log was at its last line: the phase a fault
// that ended or hit the replica then caught it in.
func phaseHit(log string) string {
	hit := "between rounds"
	total, done := 0, 0
	for _, line := range strings.Split(log, "\n") {
		switch m := phaseLine.FindStringSubmatch(line); {
		case m != nil && m[1] == "start":
			hit = "in " + m[2]
			if m[2] == "4-apply" {
				total, done = 0, 0
			}
		case m != nil:
			hit = "after " + m[2]
			if m[1] == "failed" {
				hit = m[2] + " failed"
			}
		case applyingRe.MatchString(line):
			total, _ = strconv.Atoi(applyingRe.FindStringSubmatch(line)[1])
		case appliedRe.MatchString(line):
			done++
			if done < total {
				hit = "apply, between registrations"
			} else {
				hit = "apply, after its last registration"
			}
		case roundDoneRe.MatchString(line):
			hit = "between rounds"
		}
	}
	switch hit {
	case "in 4-apply":
		if total > 0 {
			return "apply, before its first registration"
		}
	case "after 4-apply", "after 5-record":
		return "between rounds"
	case "after 1-observe", "in 2-build", "after 2-build", "in 3-solve", "after 3-solve":
		return "build or solve"
	case "in 4-claim", "after 4-claim":
		return "claim"
	case "in 1-observe":
		return "observe"
	case "in 5-record":
		return "record"
	}
	return hit
}

// leaderPhase is the phase a replica's log shows now ("" when it cannot be read).
func (st *stack) leaderPhase(id string) string {
	p := st.replicas[id]
	if p == nil {
		return ""
	}
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	return phaseHit(string(b))
}

// drawTarget draws a fault's target, each of targets alike.
func drawTarget(rng *rand.Rand) string { return targets[rng.Intn(len(targets))] }

func TestPhaseHit(t *testing.T) {
	const (
		obs    = "2026-12-01T10:00:00.000Z [TRACE] fft-allocator: phase start: round=3 phase=1-observe\n"
		obsOK  = "2026-12-01T10:00:00.010Z [TRACE] fft-allocator: phase done: round=3 phase=1-observe duration=10ms\n"
		apply  = "[TRACE] fft-allocator: phase start: round=3 phase=4-apply\n[TRACE] fft-allocator.nomad: applying: changes=3\n"
		one    = "[INFO]  fft-allocator.nomad: applied: action=start job=default/a model=x\n"
		rec    = "[TRACE] fft-allocator: phase done: round=3 phase=4-apply duration=1ms\n[TRACE] fft-allocator: phase start: round=3 phase=5-record\n"
		recOK  = "[TRACE] fft-allocator: phase done: round=3 phase=5-record duration=1ms\n[INFO]  fft-allocator: round done: round=3\n"
		failed = "[ERROR] fft-allocator: phase failed: round=3 phase=5-record duration=1ms error=\"403\"\n"
	)
	for _, tc := range []struct{ log, want string }{
		{"", "between rounds"},
		{obs, "observe"},
		{obs + obsOK, "build or solve"},
		{obs + obsOK + apply, "apply, before its first registration"},
		{obs + obsOK + apply + one, "apply, between registrations"},
		{obs + obsOK + apply + one + one + one, "apply, after its last registration"},
		{obs + obsOK + apply + one + one + one + rec, "record"},
		{obs + obsOK + apply + one + one + one + rec + recOK, "between rounds"},
		{obs + obsOK + apply + one + one + one + rec + failed, "5-record failed"},
	} {
		if got := phaseHit(tc.log); got != tc.want {
			t.Errorf("phaseHit(%q) = %q, want %q", tc.log, got, tc.want)
		}
	}
}
